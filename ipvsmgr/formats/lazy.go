package formats

import (
	"regexp"
	"strings"
	"sync"
)

// The parsers' tables are built on first use, not at package init: every
// ipvsctl process links this package, and most (version, status, a weight
// change) parse no foreign format, so compiling its patterns and filling its
// keyword sets at start-up would be start-up time every command pays.

// lazyRegexp is a pattern compiled the first time it is used.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// words is the set of the blank-separated words of s, made the first time
// it is asked for.
func words(s string) func() map[string]bool {
	return sync.OnceValue(func() map[string]bool { return wordSet(s) })
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}
