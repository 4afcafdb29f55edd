// Command package builds the Debian package of ipvsctl with nfpm used as a
// library (no downloaded tool). scripts/package.sh runs it with everything
// staged: the built binary, the man page and completions the binary printed.
//
//	go run . -version V -binary ipvsctl -stage DIR -units DIR -out FILE.deb
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

const description = `IPVS load-balancing director: state, kernel table, panel and API
 ipvsctl runs Linux IPVS directors, replacing Piranha: it keeps the desired
 state (virtual services, real servers, health checks, VRRP redundancy) in
 SQLite, makes the kernel's IPVS table, VIPs and fwmark rules match it over
 generic netlink without dropping connections, restores it at boot, prepares
 direct-routing real servers, and serves an admin panel and a JSON API.
 .
 The package starts nothing by itself: enable ipvsctl.service (the daemon)
 or ipvsctl-restore.service (a one-shot restore at boot) when wanted.`

func main() {
	version := flag.String("version", "", "package version (scripts/package/version.sh)")
	binary := flag.String("binary", "", "the built ipvsctl")
	stage := flag.String("stage", "", "directory with ipvsctl.8, ipvsctl.bash, _ipvsctl (zsh), postinst, changelog, copyright")
	units := flag.String("units", "", "directory with ipvsctl.service and ipvsctl-restore.service, ExecStart=/usr/sbin/ipvsctl")
	out := flag.String("out", "", "the .deb to write")
	flag.Parse()
	if *version == "" || *binary == "" || *stage == "" || *units == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "package: -version, -binary, -stage, -units and -out are required")
		os.Exit(2)
	}
	if err := build(*version, *binary, *stage, *units, *out); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func build(version, binary, stage, units, out string) error {
	libc, err := libcDepends(binary)
	if err != nil {
		return err
	}
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode, Owner: "root", Group: "root"}}
	}
	st := func(name string) string { return filepath.Join(stage, name) }
	contents := files.Contents{
		file(binary, "/usr/sbin/ipvsctl", 0o755),
		file(filepath.Join(units, "ipvsctl.service"), "/lib/systemd/system/ipvsctl.service", 0o644),
		file(filepath.Join(units, "ipvsctl-restore.service"), "/lib/systemd/system/ipvsctl-restore.service", 0o644),
		file(st("ipvsctl.8.gz"), "/usr/share/man/man8/ipvsctl.8.gz", 0o644),
		file(st("ipvsctl.bash"), "/usr/share/bash-completion/completions/ipvsctl", 0o644),
		file(st("_ipvsctl"), "/usr/share/zsh/vendor-completions/_ipvsctl", 0o644),
		file(st("changelog.gz"), "/usr/share/doc/ipvsctl/changelog.gz", 0o644),
		file(st("copyright"), "/usr/share/doc/ipvsctl/copyright", 0o644),
		{Destination: "/var/lib/ipvsctl", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o700, Owner: "root", Group: "root"}},
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "ipvsctl",
		Arch:          "amd64",
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "ipvsctl maintainers <ipvsctl@example.org>",
		Description:   description,
		Homepage:      "https://github.com/ipvsctl/ipvsctl",
		MTime:         time.Unix(0, 0).UTC(),
		Overridables: nfpm.Overridables{
			Depends:    []string{libc, "iptables", "kmod"},
			Recommends: []string{"ipvsadm"},
			Contents:   contents,
			Scripts:    nfpm.Scripts{PostInstall: st("postinst")},
			Deb:        nfpm.Deb{Compression: "xz"},
		},
	})
	if mt, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok {
		var sec int64
		if _, err := fmt.Sscan(mt, &sec); err == nil {
			info.MTime = time.Unix(sec, 0).UTC()
		}
	}
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("prepare the package: %w", err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("build %s: %w", out, err)
	}
	return f.Close()
}

// libcDepends is the libc6 dependency the binary needs: every library it
// links must be glibc's, and the version is the newest GLIBC_ symbol version
// it imports.
func libcDepends(binary string) (string, error) {
	ef, err := elf.Open(binary)
	if err != nil {
		return "", err
	}
	defer ef.Close()
	libs, err := ef.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("%s: %w", binary, err)
	}
	glibc := map[string]bool{"libc.so.6": true, "libm.so.6": true, "libpthread.so.0": true, "libdl.so.2": true, "libresolv.so.2": true}
	for _, l := range libs {
		if !glibc[l] {
			return "", fmt.Errorf("%s links %s, which is not glibc's: declare its package", binary, l)
		}
	}
	syms, err := ef.ImportedSymbols()
	if err != nil {
		return "", fmt.Errorf("%s: %w", binary, err)
	}
	newest := "2.2.5"
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(newest, v) {
			newest = v
		}
	}
	return "libc6 (>= " + newest + ")", nil
}

func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			fmt.Sscan(pa[i], &x)
		}
		if i < len(pb) {
			fmt.Sscan(pb[i], &y)
		}
		if x != y {
			return x < y
		}
	}
	return false
}
