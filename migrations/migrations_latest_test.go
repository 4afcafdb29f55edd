package migrations

import "testing"

// Latest, which reads no file, agrees with All, which reads them all.
func TestLatestIsTheLastOfAll(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if Latest() != len(all) || all[len(all)-1].Version != Latest() {
		t.Fatalf("Latest() = %d, All has %d migrations up to version %d", Latest(), len(all), all[len(all)-1].Version)
	}
}
