module github.com/ipvsctl/ipvsctl

go 1.26.8
