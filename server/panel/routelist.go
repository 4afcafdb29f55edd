package panel

import "net/http"

// handleFuncer is where the panel's routes are registered: its ServeMux,
// or a list of them.
type handleFuncer interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

type patternList []string

func (l *patternList) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	*l = append(*l, pattern)
}

// RoutePatterns is every route of the panel ("POST /services/{id}/enable"),
// in the order they are registered: what the tests compare with the API's
// route table and the CLI's verbs, so that a script can do what the panel does.
func RoutePatterns() []string {
	var l patternList
	(&Panel{assets: &assets{}}).routes(&l)
	return l
}
