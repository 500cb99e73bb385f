package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The Anthropic frontend's refusals, in Anthropic's error shape
// ({"type": "error", "error": {"type", "message"}}) with the HTTP status
// Anthropic answers each error type with.

// anthError is a refusal with Anthropic's error type.
type anthError struct {
	status int
	msg    string
}

func (e *anthError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &anthError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// readMessages reads a POSTed JSON body, answering the refusal itself.
func (s *Server) readMessages(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeAnthropicError(w, &anthError{status: http.StatusMethodNotAllowed, msg: "method " + r.Method + " not allowed; use POST"})
		return nil, false
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		writeAnthropicError(w, &anthError{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("request body is %d bytes; at most %d", r.ContentLength, s.cfg.MaxBodyBytes)})
		return nil, false
	}
	in, err := s.readJSON(r)
	if err != nil {
		status := http.StatusBadRequest
		if strings.Contains(err.Error(), "request body too large") {
			status = http.StatusRequestEntityTooLarge
		}
		writeAnthropicError(w, &anthError{status: status, msg: err.Error()})
		return nil, false
	}
	return in, true
}

// anthropicErrorType maps an HTTP status to Anthropic's error type and the
// status Anthropic answers that type with.
func anthropicErrorType(status int) (string, int) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", status
	case http.StatusUnauthorized:
		return "authentication_error", status
	case http.StatusForbidden:
		return "permission_error", status
	case http.StatusNotFound:
		return "not_found_error", status
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", status
	case http.StatusTooManyRequests:
		return "rate_limit_error", status
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error", 529
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error", http.StatusGatewayTimeout
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error", status
	}
	return "api_error", http.StatusInternalServerError
}

func anthropicErrorBody(status int, msg string) ([]byte, int) {
	typ, code := anthropicErrorType(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	return b, code
}

func writeAnthropicError(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, err.Error()
	var ae *anthError
	if errors.As(err, &ae) {
		status = ae.status
	}
	b, code := anthropicErrorBody(status, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
