package panel

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// The service form sets and clears a service's group; the service page
// shows it, and the edit form draws it back.
func TestServiceFormGroup(t *testing.T) {
	e := newEnv(t)
	e.seed(t, webState())
	ctx := context.Background()
	form := func(group string) {
		t.Helper()
		r := e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "scheduler", "wrr", "group", group))
		if r.Code != http.StatusSeeOther {
			t.Fatalf("group %q: %d %s", group, r.Code, excerpt(r.Body))
		}
	}
	form("edge")
	st, _, _ := e.core.State(ctx)
	if st.Services[0].Group != "edge" {
		t.Fatalf("stored group %q", st.Services[0].Group)
	}
	if page := e.get(t, "vic", "/services/web").Body; !strings.Contains(page, "<dt>Group</dt><dd>edge</dd>") {
		t.Errorf("the service page does not show the group: %s", excerpt(page))
	}
	if page := e.get(t, "alice", "/services/web/edit").Body; !strings.Contains(page, `name="group" value="edge"`) {
		t.Errorf("the edit form does not draw the group: %s", excerpt(page))
	}
	// A hysteresis with its quorum, through the same form.
	r := e.post(t, "alice", "/services/web", svcForm("name", "web", "address", "198.18.0.100", "port", "80", "scheduler", "wrr",
		"check_type", "tcp", "quorum", "3", "hysteresis", "1"))
	if st, _, _ = e.core.State(ctx); r.Code != http.StatusSeeOther || st.Services[0].Quorum != 3 || st.Services[0].Hysteresis != 1 {
		t.Fatalf("hysteresis: %d %+v", r.Code, st.Services[0])
	}
	if page := e.get(t, "alice", "/services/web/edit").Body; !strings.Contains(page, `name="hysteresis" value="1"`) {
		t.Errorf("the edit form does not draw the hysteresis")
	}
	form("")
	if st, _, _ = e.core.State(ctx); st.Services[0].Group != "" {
		t.Errorf("group not cleared: %q", st.Services[0].Group)
	}
}
