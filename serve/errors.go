package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tulip-temporal/tulip"
	"github.com/tulip-temporal/tulip/agent"
)

// apiError writes an OpenAI-shaped error.
func apiError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	body := map[string]any{"message": msg, "type": typ, "code": nil, "param": nil}
	if code != "" {
		body["code"] = code
	}
	if param != "" {
		body["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": body})
}

func badInput(w http.ResponseWriter, param, msg string) {
	apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", param, msg)
}

// notFound answers 404 for an id that names nothing here; it echoes at
// most the id's first 64 bytes.
func notFound(w http.ResponseWriter, param, id string) {
	apiError(w, http.StatusNotFound, "invalid_request_error", "response_not_found", param, fmt.Sprintf("no response %q", shortID(id)))
}

func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "",
		fmt.Sprintf("the request body is over %d bytes (tulip serve --max-body)", limit))
}

// unavailable answers 503: a response that exists could not be read now;
// a retry after a moment reads it.
func unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	apiError(w, http.StatusServiceUnavailable, "server_error", "response_unavailable", "",
		"the response's run could not be read just now (its worker is being replaced, or the server is busy): retry")
}

// busy answers 409 thread_busy: the thread has an open run. It names no
// run.
func busy(w http.ResponseWriter, param string) {
	w.Header().Set("Retry-After", "1")
	apiError(w, http.StatusConflict, "invalid_request_error", "thread_busy", param,
		"the thread has an open run (a run still going, or waiting for an approval or a client tool's result): answer it, or retry when it ends")
}

// decodeBody reads a request's JSON body into v: 413 over the body limit,
// 400 for anything but one JSON object.
func (a *apiServer) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		tooLarge(w, a.limits.maxBody)
		return false
	case err != nil:
		badInput(w, "", "the body is not a JSON object: "+err.Error())
		return false
	}
	return true
}

// runError writes the error of starting, resuming or awaiting a run. It
// reveals no run id: the messages are the kinds' own.
func runError(w http.ResponseWriter, err error, param string) {
	var rf *agent.RunFailedError
	var ae *answeredError
	switch k := tulip.KindOf(err); {
	case errors.As(err, &ae):
		apiError(w, http.StatusConflict, "invalid_request_error", "approval_answered", "input", ae.Error())
	case k == tulip.ThreadBusy:
		busy(w, param)
	case k == tulip.BadInput:
		badInput(w, "input", err.Error())
	case k == tulip.ContextTooLong:
		// As OpenAI answers a request over the model's window with
		// truncation disabled (or one no compaction brings under it).
		apiError(w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "input", err.Error())
	case k == tulip.StaleInterrupt:
		apiError(w, http.StatusConflict, "invalid_request_error", string(k), "input", "that approval or tool call was answered already, or is not the run's open one")
	case k == tulip.NotInterrupted:
		apiError(w, http.StatusConflict, "invalid_request_error", string(k), "input", "the run is not waiting for an answer")
	case errors.As(err, &rf) && (k == tulip.RunFailed || k == ""):
		apiError(w, http.StatusBadGateway, "upstream_error", "model_failed", "", rf.Error())
	case errors.As(err, &rf):
		apiError(w, http.StatusInternalServerError, "server_error", string(k), "", rf.Error())
	default:
		apiError(w, http.StatusInternalServerError, "server_error", string(k), "", "the run could not be started or read ("+string(k)+")")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONBounded writes a JSON answer under a write deadline: a client
// that does not read it is dropped.
func writeJSONBounded(w http.ResponseWriter, timeout time.Duration, status int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout))
	writeJSON(w, status, v)
}
