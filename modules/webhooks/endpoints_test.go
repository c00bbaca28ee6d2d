package webhooks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// endpointsSetup returns the registry on a fresh database with the
// production rules: https only, public addresses only.
func endpointsSetup(t *testing.T) (*webhooks.EndpointStore, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.New(t)
	return webhooks.NewEndpoints(pool, webhooks.EndpointRules{}), pool
}

func fieldsOf(err error) []string {
	e, ok := apperr.As(err)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestEndpointValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 2049-len("https://x.example/"))
	tests := []struct {
		name   string
		n      webhooks.NewEndpoint
		rules  webhooks.EndpointRules
		fields []string // the fields named, in order; none when valid
	}{
		{"https with a name", webhooks.NewEndpoint{URL: "https://hooks.example.com/flowd"}, webhooks.EndpointRules{}, nil},
		{"spaces around are trimmed", webhooks.NewEndpoint{URL: "  https://hooks.example.com/ ", Description: " x "}, webhooks.EndpointRules{}, nil},
		{"a public address", webhooks.NewEndpoint{URL: "https://93.184.215.14/hook"}, webhooks.EndpointRules{}, nil},
		{"missing url", webhooks.NewEndpoint{}, webhooks.EndpointRules{}, []string{"url"}},
		{"relative", webhooks.NewEndpoint{URL: "/hooks"}, webhooks.EndpointRules{}, []string{"url"}},
		{"http", webhooks.NewEndpoint{URL: "http://hooks.example.com/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"http when insecure is allowed", webhooks.NewEndpoint{URL: "http://hooks.example.com/"}, webhooks.EndpointRules{AllowInsecureURLs: true}, nil},
		{"ftp", webhooks.NewEndpoint{URL: "ftp://hooks.example.com/"}, webhooks.EndpointRules{AllowInsecureURLs: true}, []string{"url"}},
		{"user info", webhooks.NewEndpoint{URL: "https://u:p@hooks.example.com/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"too long", webhooks.NewEndpoint{URL: "https://x.example/" + long}, webhooks.EndpointRules{}, []string{"url"}},
		{"loopback v4", webhooks.NewEndpoint{URL: "https://127.0.0.1/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"loopback v6", webhooks.NewEndpoint{URL: "https://[::1]:8443/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"localhost", webhooks.NewEndpoint{URL: "http://localhost:9000/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"private", webhooks.NewEndpoint{URL: "https://10.1.2.3/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"private 192.168", webhooks.NewEndpoint{URL: "https://192.168.0.10/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"link-local", webhooks.NewEndpoint{URL: "https://169.254.169.254/latest"}, webhooks.EndpointRules{}, []string{"url"}},
		{"link-local v6", webhooks.NewEndpoint{URL: "https://[fe80::1%25eth0]/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"multicast", webhooks.NewEndpoint{URL: "https://224.0.0.1/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"v4-mapped loopback", webhooks.NewEndpoint{URL: "https://[::ffff:127.0.0.1]/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"NAT64 of a private address", webhooks.NewEndpoint{URL: "https://[64:ff9b::a00:1]/"}, webhooks.EndpointRules{}, []string{"url"}},
		{"private when allowed", webhooks.NewEndpoint{URL: "https://10.1.2.3/"}, webhooks.EndpointRules{AllowPrivate: true}, nil},
		{"localhost http when both allowed", webhooks.NewEndpoint{URL: "http://127.0.0.1:9000/"}, webhooks.EndpointRules{AllowPrivate: true}, nil},
		{"description too long", webhooks.NewEndpoint{URL: "https://h.example/", Description: strings.Repeat("é", 201)}, webhooks.EndpointRules{}, []string{"description"}},
		{"description of 200", webhooks.NewEndpoint{URL: "https://h.example/", Description: strings.Repeat("é", 200)}, webhooks.EndpointRules{}, nil},
		{"description with a control character", webhooks.NewEndpoint{URL: "https://h.example/", Description: "a\x07b"}, webhooks.EndpointRules{}, []string{"description"}},
		{"description with a newline", webhooks.NewEndpoint{URL: "https://h.example/", Description: "a\nb"}, webhooks.EndpointRules{}, []string{"description"}},
		{"description with a bidirectional isolate", webhooks.NewEndpoint{URL: "https://h.example/", Description: "Loans \u2067(prod)"}, webhooks.EndpointRules{}, []string{"description"}},
		{"URL with a zero-width space", webhooks.NewEndpoint{URL: "https://h.example/\u200Bhook"}, webhooks.EndpointRules{}, []string{"url"}},
		{"known types", webhooks.NewEndpoint{URL: "https://h.example/", EventTypes: []webhooks.EventType{webhooks.FlowAccepted, webhooks.FlowCreated}}, webhooks.EndpointRules{}, nil},
		{"unknown types named by index", webhooks.NewEndpoint{URL: "https://h.example/", EventTypes: []webhooks.EventType{webhooks.FlowAccepted, "flow.exploded", "", webhooks.FlowCreated}},
			webhooks.EndpointRules{}, []string{"eventTypes[1]", "eventTypes[2]"}},
		{"everything wrong at once", webhooks.NewEndpoint{URL: "http://10.0.0.1/", Description: "\x00", EventTypes: []webhooks.EventType{"nope"}},
			webhooks.EndpointRules{}, []string{"url", "description", "eventTypes[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.n.Validate(tt.rules)
			if got := fieldsOf(err); !slices.Equal(got, tt.fields) {
				t.Fatalf("fields %v, want %v (%v)", got, tt.fields, err)
			}
			if err != nil && apperr.CodeOf(err) != apperr.Invalid {
				t.Fatalf("code %s", apperr.CodeOf(err))
			}
			// An update setting the same fields is held to the same rules.
			u := webhooks.EndpointUpdate{URL: &tt.n.URL, Description: &tt.n.Description, EventTypes: &tt.n.EventTypes}
			if got := fieldsOf(u.Validate(tt.rules)); !slices.Equal(got, tt.fields) {
				t.Fatalf("update: fields %v, want %v", got, tt.fields)
			}
		})
	}
	// An update that sets nothing is valid.
	if err := (webhooks.EndpointUpdate{}).Validate(webhooks.EndpointRules{}); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointCRUD(t *testing.T) {
	t.Parallel()
	eps, _ := endpointsSetup(t)
	ctx := context.Background()
	const org = "org-crud"

	if list, err := eps.List(ctx, org, webhooks.OldestFirst); err != nil || len(list) != 0 {
		t.Fatalf("empty list: %v %v", list, err)
	}
	var hooked webhooks.Endpoint
	a, err := eps.Create(ctx, org, webhooks.NewEndpoint{URL: " https://a.example/hook ", Description: " Billing ",
		EventTypes: []webhooks.EventType{webhooks.FlowRejected, webhooks.FlowAccepted, webhooks.FlowAccepted}, Enabled: true},
		func(_ context.Context, _ database.Tx, e webhooks.Endpoint) error { hooked = e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(a.ID) != 36 || a.OrganizationID != org || a.URL != "https://a.example/hook" || a.Description != "Billing" || !a.Enabled ||
		!slices.Equal(a.EventTypes, []webhooks.EventType{webhooks.FlowAccepted, webhooks.FlowRejected}) ||
		a.CreatedAt.IsZero() || !a.UpdatedAt.Equal(a.CreatedAt) || a.DisabledReason != "" || a.FailingSince != nil {
		t.Fatalf("created %+v", a)
	}
	if hooked.ID != a.ID {
		t.Fatalf("the before hook saw %+v", hooked)
	}
	b, err := eps.Create(ctx, org, webhooks.NewEndpoint{URL: "https://b.example/", Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	if b.Enabled || len(b.EventTypes) != 0 || !b.Subscribes(webhooks.FlowExpired) {
		t.Fatalf("second: %+v", b)
	}
	if got, err := eps.Get(ctx, org, a.ID); err != nil || got.URL != a.URL || !slices.Equal(got.EventTypes, a.EventTypes) {
		t.Fatalf("get: %+v %v", got, err)
	}
	oldest, err := eps.List(ctx, org, webhooks.OldestFirst)
	if err != nil || len(oldest) != 2 || oldest[0].ID != a.ID || oldest[1].ID != b.ID {
		t.Fatalf("oldest first: %+v %v", oldest, err)
	}
	newest, err := eps.List(ctx, org, webhooks.NewestFirst)
	if err != nil || len(newest) != 2 || newest[0].ID != b.ID {
		t.Fatalf("newest first: %+v %v", newest, err)
	}

	// PATCH: only what is given changes.
	var change webhooks.EndpointChange
	u, err := eps.Update(ctx, org, a.ID, webhooks.EndpointUpdate{Description: ptr("Billing v2"), Enabled: ptr(false)}, etag.Any,
		func(_ context.Context, _ database.Tx, c webhooks.EndpointChange) error { change = c; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if u.URL != a.URL || u.Description != "Billing v2" || u.Enabled || !slices.Equal(u.EventTypes, a.EventTypes) || !u.UpdatedAt.After(a.UpdatedAt) {
		t.Fatalf("updated %+v", u)
	}
	if change.Before.Description != "Billing" || change.After.Description != "Billing v2" || change.Describe() != "description, disabled" {
		t.Fatalf("change %+v: %q", change, change.Describe())
	}
	u, err = eps.Update(ctx, org, a.ID, webhooks.EndpointUpdate{URL: ptr("https://a2.example/"), EventTypes: &[]webhooks.EventType{}, Enabled: ptr(true)}, etag.Any)
	if err != nil || u.URL != "https://a2.example/" || len(u.EventTypes) != 0 || !u.Enabled {
		t.Fatalf("second update: %+v %v", u, err)
	}
	// A refused update changes nothing.
	if _, err := eps.Update(ctx, org, a.ID, webhooks.EndpointUpdate{URL: ptr("http://a3.example/"), EventTypes: &[]webhooks.EventType{"x"}}, etag.Any); !slices.Equal(fieldsOf(err), []string{"url", "eventTypes[0]"}) {
		t.Fatalf("bad update: %v", err)
	}
	// A failing before hook rolls the change back.
	boom := errors.New("boom")
	if _, err := eps.Update(ctx, org, a.ID, webhooks.EndpointUpdate{Description: ptr("never")}, etag.Any,
		func(context.Context, database.Tx, webhooks.EndpointChange) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing hook: %v", err)
	}
	if got, _ := eps.Get(ctx, org, a.ID); got.Description != "Billing v2" || got.URL != "https://a2.example/" {
		t.Fatalf("after refusals: %+v", got)
	}

	// Delete, once.
	if _, err := eps.Delete(ctx, org, b.ID, etag.Any, func(context.Context, database.Tx, webhooks.Endpoint) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing delete hook: %v", err)
	}
	d, err := eps.Delete(ctx, org, b.ID, etag.Any)
	if err != nil || d.ID != b.ID {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := eps.Delete(ctx, org, b.ID, etag.Any); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := eps.Get(ctx, org, b.ID); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	// Malformed ids are not found, not errors of the database.
	for _, id := range []string{"", "nope", "0b7e6f2a3c1d4e5f9a8b7c6d5e4f3a21", "' or 1=1 --"} {
		if _, err := eps.Get(ctx, org, id); !errors.Is(err, webhooks.ErrEndpointNotFound) {
			t.Errorf("get %q: %v", id, err)
		}
		if _, err := eps.Update(ctx, org, id, webhooks.EndpointUpdate{}, etag.Any); !errors.Is(err, webhooks.ErrEndpointNotFound) {
			t.Errorf("update %q: %v", id, err)
		}
		if _, err := eps.Delete(ctx, org, id, etag.Any); !errors.Is(err, webhooks.ErrEndpointNotFound) {
			t.Errorf("delete %q: %v", id, err)
		}
	}
	// A create whose hook fails stores nothing.
	if _, err := eps.Create(ctx, org, webhooks.NewEndpoint{URL: "https://c.example/"},
		func(context.Context, database.Tx, webhooks.Endpoint) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing create hook: %v", err)
	}
	if list, _ := eps.List(ctx, org, webhooks.OldestFirst); len(list) != 1 {
		t.Fatalf("after a failed create: %d endpoints", len(list))
	}
}

func TestAnotherOrganizationsEndpointsDoNotExist(t *testing.T) {
	t.Parallel()
	eps, _ := endpointsSetup(t)
	ctx := context.Background()
	mine, err := eps.Create(ctx, "org-mine", webhooks.NewEndpoint{URL: "https://mine.example/", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Get(ctx, "org-other", mine.ID); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := eps.Update(ctx, "org-other", mine.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Errorf("update: %v", err)
	}
	if _, err := eps.Delete(ctx, "org-other", mine.ID, etag.Any); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Errorf("delete: %v", err)
	}
	if list, err := eps.List(ctx, "org-other", webhooks.OldestFirst); err != nil || len(list) != 0 {
		t.Errorf("list: %v %v", list, err)
	}
	if got, err := eps.Get(ctx, "org-mine", mine.ID); err != nil || !got.Enabled {
		t.Errorf("mine after the other's tries: %+v %v", got, err)
	}
}

func TestAnOrganizationHasAtMostMaxEndpoints(t *testing.T) {
	t.Parallel()
	eps, pool := endpointsSetup(t)
	ctx := context.Background()
	const org = "org-cap"
	// Concurrent creates cannot pass the cap together.
	var wg sync.WaitGroup
	errs := make(chan error, webhooks.MaxEndpoints+10)
	for range webhooks.MaxEndpoints + 10 {
		wg.Go(func() {
			_, err := eps.Create(ctx, org, webhooks.NewEndpoint{URL: "https://cap.example/", Enabled: true})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		switch {
		case err == nil:
		case apperr.CodeOf(err) == apperr.Conflict:
			refused++
		default:
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from webhook_endpoints where organization_id = $1`, org).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != webhooks.MaxEndpoints || refused != 10 {
		t.Fatalf("%d endpoints, %d refused", n, refused)
	}
	if list, err := eps.List(ctx, org, webhooks.NewestFirst); err != nil || len(list) != webhooks.MaxEndpoints {
		t.Fatalf("list: %d %v", len(list), err)
	}
	// Another organization is not held to this one's count.
	if _, err := eps.Create(ctx, "org-cap-other", webhooks.NewEndpoint{URL: "https://cap.example/"}); err != nil {
		t.Fatal(err)
	}
}

func TestMatchingTxFindsEnabledSubscribers(t *testing.T) {
	t.Parallel()
	eps, pool := endpointsSetup(t)
	ctx := context.Background()
	const org = "org-match"
	mk := func(url string, enabled bool, types ...webhooks.EventType) webhooks.Endpoint {
		e, err := eps.Create(ctx, org, webhooks.NewEndpoint{URL: url, Enabled: enabled, EventTypes: types})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	all := mk("https://all.example/", true)
	accepted := mk("https://accepted.example/", true, webhooks.FlowAccepted)
	decisions := mk("https://decisions.example/", true, webhooks.FlowAccepted, webhooks.FlowRejected)
	mk("https://off.example/", false)
	mk("https://off-accepted.example/", false, webhooks.FlowAccepted)
	if _, err := eps.Create(ctx, "org-elsewhere", webhooks.NewEndpoint{URL: "https://elsewhere.example/", Enabled: true}); err != nil {
		t.Fatal(err)
	}

	ids := func(t webhooks.EventType) []string {
		var out []string
		err := database.WithTx(ctx, pool, func(tx database.Tx) error {
			list, err := eps.MatchingTx(ctx, tx, org, t)
			for _, e := range list {
				out = append(out, e.ID)
			}
			return err
		})
		if err != nil {
			panic(err)
		}
		return out
	}
	for typ, want := range map[webhooks.EventType][]string{
		webhooks.FlowAccepted: {all.ID, accepted.ID, decisions.ID},
		webhooks.FlowRejected: {all.ID, decisions.ID},
		webhooks.FlowCreated:  {all.ID},
	} {
		if got := ids(typ); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", typ, got, want)
		}
	}
	// Disabling takes an endpoint out; enabling brings it back.
	if _, err := eps.Update(ctx, org, all.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	if got := ids(webhooks.FlowCreated); len(got) != 0 {
		t.Errorf("created after disabling: %v", got)
	}
	// What the publishing transaction sees is its own: an endpoint made in
	// it is matched, and one made elsewhere after it began is not yet.
	err := database.WithTx(ctx, pool, func(tx database.Tx) error {
		if _, err := tx.Exec(ctx, `insert into webhook_endpoints (organization_id, id, url, event_types)
			values ($1, gen_random_uuid(), 'https://in-tx.example/', '{flow.created}')`, org); err != nil {
			return err
		}
		list, err := eps.MatchingTx(ctx, tx, org, webhooks.FlowCreated)
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].URL != "https://in-tx.example/" || !slices.Equal(list[0].EventTypes, []webhooks.EventType{webhooks.FlowCreated}) {
			t.Errorf("in the transaction: %+v", list)
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}
	if got := ids(webhooks.FlowCreated); len(got) != 0 {
		t.Errorf("after the rollback: %v", got)
	}
}

func TestEnablingClearsTheFailureState(t *testing.T) {
	t.Parallel()
	eps, pool := endpointsSetup(t)
	ctx := context.Background()
	e, err := eps.Create(ctx, "org-f", webhooks.NewEndpoint{URL: "https://f.example/", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	// What the failure handling (to come) will write.
	if _, err := pool.Exec(ctx, `update webhook_endpoints set enabled = false, disabled_reason = 'failing for 5 days',
		failing_since = now() - interval '5 days' where id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	got, err := eps.Get(ctx, "org-f", e.ID)
	if err != nil || got.Enabled || got.DisabledReason != "failing for 5 days" || got.FailingSince == nil {
		t.Fatalf("disabled by flowd: %+v %v", got, err)
	}
	// A change that leaves it disabled keeps the reason.
	if got, err = eps.Update(ctx, "org-f", e.ID, webhooks.EndpointUpdate{Description: ptr("x")}, etag.Any); err != nil || got.DisabledReason == "" {
		t.Fatalf("description: %+v %v", got, err)
	}
	if got, err = eps.Update(ctx, "org-f", e.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any); err != nil || !got.Enabled ||
		got.DisabledReason != "" || got.FailingSince != nil {
		t.Fatalf("enabled: %+v %v", got, err)
	}
}
