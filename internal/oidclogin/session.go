package oidclogin

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/sessions"
)

// Session is a signed-in person as a relying party remembers them in an
// encrypted, signed cookie.
type Session struct {
	// ID is random and new at every sign-in.
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
}

// Sessions keeps one kind of session (console or consent) in a cookie of its
// own, with keys of its own derived from the session key.
type Sessions struct {
	store    *sessions.CookieStore
	name     string
	idle     time.Duration
	absolute time.Duration
	now      func() time.Time
}

// SessionConfig configures a Sessions.
type SessionConfig struct {
	// Name is the cookie's name, e.g. flowd_console.
	Name string
	// Key is the deployment's session key (FLOWD_SESSION_KEY); the cookie's
	// signing and encryption keys are derived from it and Name, so no two
	// kinds of cookie share keys.
	Key []byte
	// Secure sets the cookie's Secure flag (under https).
	Secure bool
	// Idle ends a session not used for this long; Absolute ends any session
	// this long after sign-in.
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
	return &Sessions{store: cookieStore(c.Key, c.Name, c.Secure, c.Absolute), name: c.Name,
		idle: c.Idle, absolute: c.Absolute, now: c.Now}
}

func cookieStore(root []byte, name string, secure bool, maxAge time.Duration) *sessions.CookieStore {
	st := sessions.NewCookieStore(derive(root, name+" hash"), derive(root, name+" block"))
	st.Options = &sessions.Options{Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	st.MaxAge(int(maxAge / time.Second))
	return st
}

// Get returns the request's session when it exists and has not timed out.
// It refreshes the idle clock (re-sending the cookie) at most once a minute.
func (s *Sessions) Get(w http.ResponseWriter, r *http.Request) (Session, bool) {
	raw, err := s.store.New(r, s.name)
	if err != nil || raw.IsNew {
		return Session{}, false
	}
	v := raw.Values
	sess := Session{Attrs: map[string]string{}}
	var created, seen int64
	var ok bool
	if sess.ID, ok = v["id"].(string); !ok || sess.ID == "" {
		return Session{}, false
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
		return Session{}, false
	}
	if now.Sub(sess.SeenAt) > time.Minute {
		sess.SeenAt = now
		raw.Values["seen"] = now.Unix()
		_ = s.store.Save(r, w, raw)
	}
	return sess, true
}

// Start begins a new session, replacing whatever cookie the browser sent, so
// that a session planted before sign-in is never the one signed in. It fills
// in ID, CSRF and the times.
func (s *Sessions) Start(w http.ResponseWriter, r *http.Request, sess Session) (Session, error) {
	now := s.now()
	sess.ID, sess.CSRF = randomString(), randomString()
	sess.CreatedAt, sess.SeenAt = now, now
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

// Clear ends the session by expiring its cookie.
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
