package oidclogin

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/sessions"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/staff"
)

// Session is a signed-in person as a relying party remembers them: an
// encrypted, signed cookie and, for a session the server can end, its
// record (Record), without which the cookie admits nothing.
type Session struct {
	// ID is random and new at every sign-in; it is the token of the
	// session's record, which stores only its hash.
	ID      string
	Issuer  string
	Subject string
	// IDToken is kept as the id_token_hint of RP-initiated logout.
	IDToken string
	// CSRF is the token every form POST of the session must carry.
	CSRF string
	// Attrs are what the application took from the ID token (organization,
	// role, national id…).
	Attrs     map[string]string
	CreatedAt time.Time
	SeenAt    time.Time
	// Record is the server's record of the session. Before Start the
	// caller fills in what only it knows (the staff account, organization,
	// username, provider session, browser and address, and the ID when it
	// was promised before, as the provider's sid is); Start and Get return
	// it as stored.
	Record staff.Session
}

// Records keeps the server's records of sessions; the identity module's
// login.Sessions implements it.
type Records interface {
	StartSession(ctx context.Context, n staff.NewSession) (staff.Session, error)
	SessionByToken(ctx context.Context, token string) (staff.Session, bool, error)
	TouchSession(ctx context.Context, id string, now, idleUntil time.Time) error
	EndSessionByToken(ctx context.Context, token string, before ...database.BeforeCommit[[]staff.Session]) ([]staff.Session, error)
	EndReplacedSession(ctx context.Context, token string, before ...database.BeforeCommit[[]staff.Session]) ([]staff.Session, error)
}

// Sessions keeps one kind of session (console, consent, the provider's) in
// a cookie of its own, with keys of its own derived from the session key,
// and, with Records, a record on the server of every session that has a
// subject: such a session lives only while its record does, so the server
// ends it by deleting the record. A session without a subject (the
// provider's anonymous browser id) is the cookie alone.
type Sessions struct {
	store     *sessions.CookieStore
	name      string
	kind      staff.SessionKind
	records   Records
	anonymous bool
	idle      time.Duration
	absolute  time.Duration
	now       func() time.Time
	decoded   decodedCookies
}

// SessionConfig configures a Sessions.
type SessionConfig struct {
	// Name is the cookie's name, e.g. flowd_console.
	Name string
	// Kind is the kind of the sessions' records.
	Kind staff.SessionKind
	// Records keeps the records; nil keeps sessions in the cookie alone,
	// which nothing on the server can end (for tests of the cookie).
	Records Records
	// Anonymous records do not name the person: an end user's subject at
	// an eID may be personal data, and nothing lists their sessions.
	Anonymous bool
	// Key is the deployment's session key (FLOWD_SESSION_KEY); the cookie's
	// signing and encryption keys are derived from it and Name, so no two
	// kinds of cookie share keys.
	Key []byte
	// Secure sets the cookie's Secure flag (under https).
	Secure bool
	// Idle ends a session not used for this long; Absolute ends any session
	// this long after sign-in. The server enforces both on the record too.
	Idle, Absolute time.Duration
	Now            func() time.Time
}

// derive returns a 32-byte key for purpose from the root key.
func derive(root []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, root, nil, "flowd cookie "+purpose, 32)
	if err != nil {
		panic(err) // only for absurd lengths
	}
	return k
}

// NewSessions returns the store of one kind of session.
func NewSessions(c SessionConfig) *Sessions {
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Sessions{store: cookieStore(c.Key, c.Name, c.Secure, c.Absolute), name: c.Name, kind: c.Kind, decoded: newDecodedCookies(),
		records: c.Records, anonymous: c.Anonymous, idle: c.Idle, absolute: c.Absolute, now: c.Now}
}

func cookieStore(root []byte, name string, secure bool, maxAge time.Duration) *sessions.CookieStore {
	st := sessions.NewCookieStore(derive(root, name+" hash"), derive(root, name+" block"))
	st.Options = &sessions.Options{Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	st.MaxAge(int(maxAge / time.Second))
	return st
}

// Get returns the request's session when it exists, has not timed out and,
// when it has a subject, its record lives; an error only when the records
// cannot be read. It refreshes the idle clocks (re-sending the cookie,
// touching the record) at most once a minute.
func (s *Sessions) Get(w http.ResponseWriter, r *http.Request) (Session, bool, error) {
	raw, ok := s.decoded.open(s.store, s.name, r)
	if !ok {
		// A cookie that does not decode (another key, tampered) is no session.
		return Session{}, false, nil
	}
	v := raw.Values
	sess := Session{Attrs: map[string]string{}}
	var created, seen int64
	if sess.ID, ok = v["id"].(string); !ok || sess.ID == "" {
		return Session{}, false, nil
	}
	sess.Issuer, _ = v["iss"].(string)
	sess.Subject, _ = v["sub"].(string)
	sess.IDToken, _ = v["idt"].(string)
	sess.CSRF, _ = v["csrf"].(string)
	created, _ = v["created"].(int64)
	seen, _ = v["seen"].(int64)
	for k, val := range v {
		if ks, ok := k.(string); ok && strings.HasPrefix(ks, "a:") {
			sess.Attrs[ks[2:]], _ = val.(string)
		}
	}
	sess.CreatedAt, sess.SeenAt = time.Unix(created, 0), time.Unix(seen, 0)
	now := s.now()
	if now.Sub(sess.CreatedAt) > s.absolute || now.Sub(sess.SeenAt) > s.idle {
		s.Clear(w, r)
		return Session{}, false, nil
	}
	if s.records != nil && sess.Subject != "" {
		rec, found, err := s.records.SessionByToken(r.Context(), sess.ID)
		if err != nil {
			return Session{}, false, err
		}
		if !found || rec.Kind != s.kind || !rec.LiveAt(now) {
			s.Clear(w, r)
			return Session{}, false, nil
		}
		if now.Sub(rec.LastSeenAt) > time.Minute {
			if err := s.records.TouchSession(r.Context(), rec.ID, now, now.Add(s.idle)); err != nil {
				return Session{}, false, err
			}
			rec.LastSeenAt, rec.IdleUntil = now, now.Add(s.idle)
		}
		sess.Record = rec
	}
	if now.Sub(sess.SeenAt) > time.Minute {
		sess.SeenAt = now
		raw.Values["seen"] = now.Unix()
		_ = s.store.Save(r, w, raw)
	}
	return sess, true, nil
}

// Start begins a new session, replacing whatever cookie the browser sent, so
// that a session planted before sign-in is never the one signed in. It fills
// in ID, CSRF and the times and, for a session with a subject, stores its
// record (see Session.Record).
func (s *Sessions) Start(w http.ResponseWriter, r *http.Request, sess Session) (Session, error) {
	now := s.now()
	sess.ID, sess.CSRF = randomString(), randomString()
	sess.CreatedAt, sess.SeenAt = now, now
	if s.records != nil && sess.Subject != "" {
		rec := sess.Record
		rec.Kind = s.kind
		if !s.anonymous {
			rec.Issuer, rec.Subject = sess.Issuer, sess.Subject
		}
		rec.CreatedAt, rec.LastSeenAt, rec.IdleUntil, rec.ExpiresAt = now, now, now.Add(s.idle), now.Add(s.absolute)
		stored, err := s.records.StartSession(r.Context(), staff.NewSession{Session: rec, Token: sess.ID})
		if err != nil {
			return Session{}, err
		}
		sess.Record = stored
	}
	raw := sessions.NewSession(s.store, s.name)
	opts := *s.store.Options
	raw.Options = &opts
	raw.Values["id"] = sess.ID
	raw.Values["iss"] = sess.Issuer
	raw.Values["sub"] = sess.Subject
	raw.Values["idt"] = sess.IDToken
	raw.Values["csrf"] = sess.CSRF
	raw.Values["created"] = now.Unix()
	raw.Values["seen"] = now.Unix()
	for k, v := range sess.Attrs {
		raw.Values["a:"+k] = v
	}
	if err := s.store.Save(r, w, raw); err != nil {
		// An ID token too large for a cookie: keep the session without the hint.
		delete(raw.Values, "idt")
		sess.IDToken = ""
		if err2 := s.store.Save(r, w, raw); err2 != nil {
			return Session{}, errors.Join(err, err2)
		}
	}
	return sess, nil
}

// End ends sess, which Get returned: its record goes, with the records of
// the same sign-in (see identity.Sessions), and the cookie is expired. It
// returns the sessions ended; before runs in the transaction that ends them.
func (s *Sessions) End(w http.ResponseWriter, r *http.Request, sess Session, before ...database.BeforeCommit[[]staff.Session]) ([]staff.Session, error) {
	s.Clear(w, r)
	if s.records == nil || sess.Subject == "" {
		return nil, nil
	}
	return s.records.EndSessionByToken(r.Context(), sess.ID, before...)
}

// Replace ends the session the request brings, alone, before a new sign-in
// in its browser replaces it: a copy of its cookie must not outlive it, but
// the sessions of its sign-in (the provider's single sign-on the new
// sign-in may come through) live on. before runs in the transaction that
// ends it.
func (s *Sessions) Replace(w http.ResponseWriter, r *http.Request, before ...database.BeforeCommit[[]staff.Session]) error {
	old, ok, err := s.Get(w, r)
	if err != nil || !ok || s.records == nil || old.Subject == "" {
		return err
	}
	_, err = s.records.EndReplacedSession(r.Context(), old.ID, before...)
	return err
}

// Clear forgets the session in this browser by expiring its cookie; its
// record, if any, is left to End or to its timeouts.
func (s *Sessions) Clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: s.name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: s.store.Options.Secure, SameSite: http.SameSiteLaxMode})
}

func randomString() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
