package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server/realserver"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Code names a kind of failure the CLI, the API and the panel each turn into
// their own form: an exit status, an HTTP status, a message beside a field.
type Code string

const (
	CodeNotFound  Code = "not_found" // no such service, server, revision, user
	CodeExists    Code = "exists"    // the name or key is taken
	CodeInvalid   Code = "invalid"   // the document or change does not validate (Fields say where)
	CodeMalformed Code = "malformed" // not JSON, or not the expected shape
	CodeBadInput  Code = "bad_input" // some other error in what was asked (a revision number, a format)
	CodeStale     Code = "stale"     // based on a revision that is no longer current
	CodeBusy      Code = "busy"      // the database or the kernel lock stayed taken
	CodeForbidden Code = "forbidden" // the role does not allow it
	// CodeBackup refuses a change on the backup director of a pair: it
	// follows the master's desired state, so changes are made there.
	CodeBackup Code = "backup"
	// CodeUnavailable: this process is not set up for what was asked (no
	// SSH identity for real servers); the message says how to set it up.
	CodeUnavailable Code = "unavailable"
	CodeAuth        Code = "unauthorized"
	CodeTooLarge    Code = "too_large"
	// CodeTooMany: the caller did this too often (a per-user rate limit);
	// the API says when it may again (Retry-After).
	CodeTooMany  Code = "too_many_requests"
	CodeInternal Code = "internal"
)

// RateLimitedError refuses what a user asked too often: RetryAfter is
// when it may again.
type RateLimitedError struct {
	What       string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s: try again in %s", e.What, max(e.RetryAfter, time.Second).Round(time.Second))
}

// Seconds is the Retry-After header's value (at least 1).
func (e *RateLimitedError) Seconds() int {
	return max(int((e.RetryAfter+time.Second-1)/time.Second), 1)
}

// Error is a failure of the core with its kind.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf classifies err.
func CodeOf(err error) Code {
	var e *Error
	var ve *ipvsmgr.ValidationError
	var stale *store.StaleError
	var refused *formats.ParseError
	var input *realserver.InputError
	var limited *RateLimitedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.As(err, &limited):
		return CodeTooMany
	case errors.As(err, &refused):
		return CodeBadInput
	case errors.As(err, &ve):
		if len(ve.Problems) == 1 && ve.Problems[0].Field == "document" {
			return CodeMalformed
		}
		return CodeInvalid
	case errors.As(err, &stale):
		return CodeStale
	case errors.As(err, &input):
		return CodeBadInput
	case errors.Is(err, store.ErrBusy):
		return CodeBusy
	case errors.Is(err, store.ErrDiskFull), errors.Is(err, store.ErrCorrupt):
		return CodeUnavailable
	case errors.Is(err, store.ErrNotFound):
		return CodeNotFound
	}
	return CodeInternal
}

// IsUserError reports whether err is about what was asked (exit status 2),
// not a failure of the director.
func IsUserError(err error) bool {
	switch CodeOf(err) {
	case CodeNotFound, CodeExists, CodeInvalid, CodeMalformed, CodeBadInput, CodeTooLarge:
		return true
	}
	return false
}

// HTTPStatus is the HTTP status of each kind of failure: the one mapping
// the API answers with, the panel's error pages use and the client reads
// back (CodeOfStatus, for an answer without a code).
func HTTPStatus(code Code) int {
	for _, s := range codeStatus() {
		if s.Code == code {
			return s.Status
		}
	}
	return http.StatusInternalServerError
}

// CodeOfStatus is the code an HTTP status stands for, for an error answer
// that names none (a proxy's, an old daemon's).
func CodeOfStatus(status int) Code {
	for _, s := range codeStatus() {
		if s.Status == status && s.Primary {
			return s.Code
		}
	}
	return CodeInternal
}

// CodeStatus is one code and its HTTP status; Primary marks the code a
// status that several codes share is read back as.
type CodeStatus struct {
	Code    Code
	Status  int
	Primary bool
}

// CodeStatuses is the whole mapping, for the tests that walk it.
func CodeStatuses() []CodeStatus { return codeStatus() }

func codeStatus() []CodeStatus {
	return []CodeStatus{
		{CodeMalformed, http.StatusBadRequest, true},
		{CodeAuth, http.StatusUnauthorized, true},
		{CodeForbidden, http.StatusForbidden, true},
		{CodeNotFound, http.StatusNotFound, true},
		{CodeExists, http.StatusConflict, false},
		{CodeStale, http.StatusConflict, true},
		{CodeBackup, http.StatusConflict, false},
		{CodeLastAdmin, http.StatusConflict, false},
		{CodeTooLarge, http.StatusRequestEntityTooLarge, true},
		{CodeTooMany, http.StatusTooManyRequests, true},
		{CodeInvalid, http.StatusUnprocessableEntity, true},
		{CodeBadInput, http.StatusUnprocessableEntity, false},
		{CodeBusy, http.StatusServiceUnavailable, true},
		{CodeUnavailable, http.StatusServiceUnavailable, false},
		{CodeInternal, http.StatusInternalServerError, true},
	}
}

// Errorf is an error with a code, for the rooms beside the core.
func Errorf(code Code, format string, args ...any) error { return errorf(code, format, args...) }
