package panel

import "net/http"

// RoutePatterns is every route of the panel ("POST /services/{id}/enable"),
// in the order they are registered: what the tests compare with the API's
// route table and the CLI's verbs, so that a script can do what the panel does.
func RoutePatterns() []string {
	var l []string
	(&Panel{assets: &assets{}}).routes(func(pattern string, _ http.HandlerFunc) { l = append(l, pattern) })
	return l
}
