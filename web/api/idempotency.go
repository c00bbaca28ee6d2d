package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// The headers of idempotent requests.
const (
	headerIdempotencyKey     = "Idempotency-Key"
	headerIdempotentReplayed = "Idempotent-Replayed"
)

// keptHeaders are the headers of an answer that a replay repeats.
var keptHeaders = []string{echo.HeaderContentType, echo.HeaderLocation, "ETag"}

// maxKeptBody bounds the body of an answer kept after it was written; one
// longer is not kept (none of the API's is).
const maxKeptBody = 256 << 10

// keyedRequestKey holds a request's *keyedRequest in the echo context.
const keyedRequestKey = "flowd.keyedRequest"

// keyedRequest is a request that carries an Idempotency-Key, while it runs.
type keyedRequest struct {
	store   idempotency.Store
	request idempotency.Request
	// kept is the answer keepReply kept in the change's transaction.
	kept *idempotency.Answer
}

func keyedRequestOf(c echo.Context) *keyedRequest {
	k, _ := c.Get(keyedRequestKey).(*keyedRequest)
	return k
}

// Idempotent makes a POST of the API honour Idempotency-Key: the same key
// with the same request (client, method, path and query, body) within 24
// hours replays the first answer with Idempotent-Replayed: true, and is
// refused with a 422 for another request; a key over 255 characters is a
// 400. It runs after authentication: keys are the organization's.
//
// A handler whose request changes something passes keepReply to the
// module's write, so that the answer is kept in the change's transaction and
// the change cannot happen twice; a request that a concurrent one with the
// same key beat to it fails there, rolls back, and answers with the
// winner's answer. An answer not kept so (a request that changed nothing) is
// kept once written. Only successes are kept: a failed request changed
// nothing, and its key stays free for a retry.
func (h *Handler) Idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return h.idempotent(next, nil)
}

// idempotent is Idempotent, with form, when not nil, making the request
// that is compared of the body instead of its canonical JSON.
func (h *Handler) idempotent(next echo.HandlerFunc, form func(c echo.Context, r *idempotency.Request, body []byte)) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get(headerIdempotencyKey)
		if key == "" {
			return next(c)
		}
		if len(key) > idempotency.MaxKey {
			return apperr.InvalidFields([]apperr.FieldError{{Field: headerIdempotencyKey,
				Message: fmt.Sprintf("must be at most %d characters", idempotency.MaxKey)}})
		}
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			// Too large, or cut short: the handler reads the same error and answers it.
			c.Request().Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failingReader{err}))
			return next(c)
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(body))
		p := httpkit.Principal(c)
		k := &keyedRequest{store: h.answers, request: idempotency.Request{OrganizationID: p.OrganizationID,
			ClientID: p.ClientID, Key: key, Method: c.Request().Method, Path: requestPath(c.Request().URL),
			Body: canonicalJSON(body)}}
		if form != nil {
			form(c, &k.request, body)
		}
		ctx := c.Request().Context()
		if done, err := h.replayed(c, k.request); done || err != nil {
			return err
		}
		c.Set(keyedRequestKey, k)
		rec := &answerRecorder{ResponseWriter: c.Response().Writer}
		c.Response().Writer = rec
		if err := next(c); err != nil {
			return h.afterFailure(c, k, err)
		}
		if k.kept == nil && c.Response().Status/100 == 2 && !rec.overflow {
			h.keepWritten(ctx, c, k, rec.body.Bytes())
		}
		return nil
	}
}

// replayed answers a request whose key holds an answer: that answer, or a
// 422 when the key was used with another request. It reports whether it
// answered.
func (h *Handler) replayed(c echo.Context, r idempotency.Request) (bool, error) {
	a, err := h.answers.Lookup(c.Request().Context(), r)
	var mismatch *idempotency.MismatchError
	switch {
	case err == nil:
		return true, writeAnswer(c, a, true)
	case errors.As(err, &mismatch):
		return true, keyReused(mismatch)
	case errors.Is(err, idempotency.ErrNotFound):
		return false, nil
	}
	return true, err
}

// afterFailure answers a keyed request that failed with err. A conflict may
// be a concurrent request with the same key that changed first (the flow it
// cancelled is no longer active, the key its answer took): when that one's
// answer is kept, it is this request's answer too.
func (h *Handler) afterFailure(c echo.Context, k *keyedRequest, err error) error {
	taken := errors.Is(err, idempotency.ErrTaken)
	if c.Response().Committed || (!taken && apperr.CodeOf(err) != apperr.Conflict) {
		return err
	}
	if done, lerr := h.replayed(c, k.request); done {
		return lerr
	}
	if taken {
		return apperr.New(apperr.Conflict, "Another request with this Idempotency-Key finished first; retry to get its answer.")
	}
	return err
}

// keepWritten keeps the answer a handler wrote without keeping it in a
// transaction: its request changed nothing, so a failure to keep it costs
// only the replay, and is logged.
func (h *Handler) keepWritten(ctx context.Context, c echo.Context, k *keyedRequest, body []byte) {
	a := idempotency.Answer{Status: c.Response().Status, Header: http.Header{}, Body: body}
	for _, name := range keptHeaders {
		if v := c.Response().Header().Values(name); len(v) > 0 {
			a.Header[name] = v
		}
	}
	if err := k.store.Keep(ctx, k.request, a); err != nil && !errors.Is(err, idempotency.ErrTaken) {
		h.log.WarnContext(ctx, "keeping the answer to an Idempotency-Key", "error", err.Error())
	}
}

// keyReused is the 422 of a key first used with another request.
func keyReused(m *idempotency.MismatchError) error {
	return apperr.New(apperr.IdempotencyMismatch,
		"This Idempotency-Key was used within the last 24 hours with a different request (%s %s). Use a new key for a new request.",
		m.Method, m.Path)
}

// reply is the answer of an API write: its status, the headers a replay
// repeats (Location, ETag) and its JSON body.
type reply struct {
	status int
	header http.Header
	body   any
	// flowID names the flow the body shows, if any: deleting the flow
	// forgets the kept answer with everything else personal.
	flowID string
}

// keepReply returns the hook (database.BeforeCommit) that keeps the reply
// render makes of what a write did as the answer to the request's
// Idempotency-Key, in the write's transaction, so that the two commit
// together; nil when the request has no key. Pass it last, after any audit
// hook: a concurrent request with the same key waits on it until the first
// commits, and then fails with idempotency.ErrTaken, which rolls its write
// back.
func keepReply[T any](c echo.Context, render func(done T) reply) database.BeforeCommit[T] {
	k := keyedRequestOf(c)
	if k == nil {
		return nil
	}
	return func(ctx context.Context, tx database.Tx, done T) error {
		r := render(done)
		buf, err := httpkit.EncodeJSON(r.body)
		if err != nil {
			return err
		}
		body := bytes.Clone(buf.Bytes())
		httpkit.PutJSONBuffer(buf)
		a := idempotency.Answer{Status: r.status, Header: r.header.Clone(), Body: body, FlowID: r.flowID}
		if a.Header == nil {
			a.Header = http.Header{}
		}
		a.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		if err := k.store.KeepTx(ctx, tx, k.request, a); err != nil {
			return err
		}
		k.kept = &a
		return nil
	}
}

// writeReply writes the answer of a write: the one keepReply kept, when it
// did, so that the first answer and its replays are the same bytes;
// otherwise r.
func (h *Handler) writeReply(c echo.Context, r reply) error {
	if k := keyedRequestOf(c); k != nil && k.kept != nil {
		return writeAnswer(c, *k.kept, false)
	}
	header := c.Response().Header()
	for name, values := range r.header {
		header[name] = values
	}
	return httpkit.WriteJSON(c, r.status, r.body)
}

// writeAnswer writes a kept answer, marked as a replay when it is one.
func writeAnswer(c echo.Context, a idempotency.Answer, replayed bool) error {
	h := c.Response().Header()
	for name, values := range a.Header {
		h[name] = values
	}
	if replayed {
		h.Set(headerIdempotentReplayed, "true")
	}
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(a.Body)))
	c.Response().WriteHeader(a.Status)
	_, err := c.Response().Write(a.Body)
	return err
}

// requestPath is a request's path and its query, the query's parameters in
// order, so that the same query written in another order is the same request.
func requestPath(u *url.URL) string {
	path := u.EscapedPath()
	if u.RawQuery == "" {
		return path
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return path + "?" + u.RawQuery
	}
	return path + "?" + q.Encode()
}

// canonicalJSON is body, when it is one JSON value, written with its object
// members in order and without white space, so that a retry that encodes the
// same request differently is the same request; any other body is itself.
func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	if _, err := dec.Token(); err != io.EOF {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// answerRecorder passes a response through and keeps a copy of its body.
type answerRecorder struct {
	http.ResponseWriter
	body     bytes.Buffer
	overflow bool // the body is longer than maxKeptBody
}

func (r *answerRecorder) Write(b []byte) (int, error) {
	if !r.overflow {
		if r.body.Len()+len(b) > maxKeptBody {
			r.overflow = true
		} else {
			r.body.Write(b)
		}
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (r *answerRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }
