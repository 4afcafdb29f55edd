module github.com/ipvsctl/ipvsctl

go 1.26.8

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/coreos/go-iptables v0.8.0
	github.com/google/go-cmp v0.7.0
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/moby/ipvs v1.1.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/sirupsen/logrus v1.9.0 // indirect
)
