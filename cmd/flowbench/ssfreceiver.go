package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// eventConsentRevoked is the event a withdrawal puts on a data holder's streams.
const eventConsentRevoked = "urn:flowd:event:consent-revoked"

// setReceiver is a data holder's push endpoint (RFC 8935): it notes when the
// first SET of each consent-revoked consent arrives and acknowledges every
// SET with 202. It reads the SET's claims without checking its signature:
// the tests check signatures, the benchmark times arrivals.
type setReceiver struct {
	mu      sync.Mutex
	revoked map[string]time.Time // consent (flow) id → first arrival
	sets    int                  // SETs received, duplicates and other events included
	bad     int                  // bodies that were not a SET

	srv *http.Server
	url string
}

func startSETReceiver() (*setReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &setReceiver{revoked: map[string]time.Time{}, url: "http://" + ln.Addr().String() + "/ssf"}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.receive)}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *setReceiver) receive(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	claims, err := setClaims(string(body))
	r.mu.Lock()
	r.sets++
	if err != nil {
		r.bad++
	} else if _, ok := claims.Events[eventConsentRevoked]; ok {
		if _, seen := r.revoked[claims.SubID.Consent.ID]; !seen {
			r.revoked[claims.SubID.Consent.ID] = at
		}
	}
	r.mu.Unlock()
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"err":"invalid_request","description":"not a SET"}`))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// arrived returns when each of ids' consent-revoked SET arrived, and how
// many have not.
func (r *setReceiver) arrived(ids []string) (map[string]time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, missing := make(map[string]time.Time, len(ids)), 0
	for _, id := range ids {
		if at, ok := r.revoked[id]; ok {
			got[id] = at
		} else {
			missing++
		}
	}
	return got, missing
}

func (r *setReceiver) close() { _ = r.srv.Close() }

// setClaimSet is what the benchmark reads of a SET.
type setClaimSet struct {
	JTI   string `json:"jti"`
	SubID struct {
		Consent struct {
			ID string `json:"id"`
		} `json:"consent"`
	} `json:"sub_id"`
	Events map[string]json.RawMessage `json:"events"`
}

// setClaims decodes a compact JWS's payload, unverified.
func setClaims(jws string) (setClaimSet, error) {
	parts := strings.Split(strings.TrimSpace(jws), ".")
	if len(parts) != 3 {
		return setClaimSet{}, errors.New("not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return setClaimSet{}, err
	}
	var c setClaimSet
	if err := json.Unmarshal(payload, &c); err != nil {
		return setClaimSet{}, err
	}
	if c.JTI == "" || len(c.Events) == 0 {
		return setClaimSet{}, errors.New("a JWT without jti or events")
	}
	return c, nil
}

// silentReceiver accepts connections and never answers, reading and
// dropping what comes, until flowd gives up on them or the receiver closes.
type silentReceiver struct {
	ln    net.Listener
	url   string
	mu    sync.Mutex
	conns map[net.Conn]bool
	total int // connections accepted
}

func startSilentReceiver() (*silentReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &silentReceiver{ln: ln, url: "http://" + ln.Addr().String() + "/ssf", conns: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.total++
			s.mu.Unlock()
			go func() {
				_, _ = io.Copy(io.Discard, c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
		}
	}()
	return s, nil
}

// accepted is how many connections the receiver took.
func (s *silentReceiver) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *silentReceiver) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}
