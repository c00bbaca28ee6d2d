package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
	jose "github.com/go-jose/go-jose/v4"
)

// dpopClient calls the API as a client whose tokens are DPoP-bound (RFC
// 9449) would: one key, a token obtained with a proof of it and renewed
// before it expires, and a fresh proof signed for every request.
type dpopClient struct {
	base   string
	org    org
	signer jose.Signer
	http   *http.Client

	mu     sync.Mutex
	token  string
	ath    string // base64url SHA-256 of token, the proofs' ath
	expiry time.Time
}

func (b *bench) newDPoPClient(o org) (*dpopClient, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return nil, err
	}
	d := &dpopClient{base: b.base, org: o, signer: signer, http: &http.Client{Transport: b.transport, Timeout: 30 * time.Second}}
	// The first token is fetched here so that no scenario pays for it.
	if _, _, err := d.current(); err != nil {
		return nil, err
	}
	return d, nil
}

// proof signs a DPoP proof for one request; ath is empty at the token endpoint.
func (d *dpopClient) proof(method, path, ath string) (string, error) {
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": d.base + path, "iat": time.Now().Unix()}
	if ath != "" {
		claims["ath"] = ath
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := d.signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// current returns the token and its hash, renewing the token a minute
// before it expires.
func (d *dpopClient) current() (token, ath string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.token != "" && time.Until(d.expiry) > time.Minute {
		return d.token, d.ath, nil
	}
	proof, err := d.proof(http.MethodPost, "/oauth/token", "")
	if err != nil {
		return "", "", err
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, d.base+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", proof)
	req.SetBasicAuth(url.QueryEscape(d.org.ClientID), url.QueryEscape(d.org.ClientSecret))
	res, err := d.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer res.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.NewDecoder(res.Body).Decode(&tok); err != nil || res.StatusCode != http.StatusOK || tok.TokenType != "DPoP" {
		return "", "", fmt.Errorf("DPoP token: %s, token_type %q, %v", res.Status, tok.TokenType, err)
	}
	sum := sha256.Sum256([]byte(tok.AccessToken))
	d.token, d.ath = tok.AccessToken, base64.RawURLEncoding.EncodeToString(sum[:])
	d.expiry = time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second)
	return d.token, d.ath, nil
}

// request is a request with the DPoP-bound token and its own proof.
func (d *dpopClient) request(method, path string, want int) (loadgen.Request, error) {
	token, ath, err := d.current()
	if err != nil {
		return loadgen.Request{}, err
	}
	proof, err := d.proof(method, path, ath)
	if err != nil {
		return loadgen.Request{}, err
	}
	return loadgen.Request{Method: method, Path: path, Header: "Authorization: DPoP " + token + "\r\nDPoP: " + proof + "\r\n", Want: want}, nil
}

// retrieveDPoPScenario: retrieve with a DPoP-bound token and a new proof
// on every request, against retrieve's statements and the recording of the
// proof's jti, which a DPoP request adds.
func retrieveDPoPScenario(ctx context.Context, b *bench) (Result, error) {
	d, err := b.newDPoPClient(b.deep)
	if err != nil {
		return Result{}, err
	}
	return b.measure(ctx, "retrieve-dpop", func(_, _ int) (loadgen.Request, error) {
		return d.request("GET", "/api/flows/"+randomSeeded(b), 200)
	}, map[string]string{"org": b.deep.ID, "flows": strconv.Itoa(b.o.deepFlows)}, "retrieve+dpop_proof")
}
