// Package payload makes the JSON bodies flowd sends to webhook receivers,
// in the API's spelling: a flow event's and an endpoint event's.
package payload

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// Flow is the JSON body of a flow event.
type Flow struct {
	Type      string   `json:"type"`
	Timestamp string   `json:"timestamp"`
	Data      FlowData `json:"data"`
}

// FlowData is a flow event's data.
type FlowData struct {
	FlowID         string `json:"flowId"`
	ReferenceID    string `json:"referenceId"`
	OrganizationID string `json:"organizationId"`
	Status         string `json:"status"`
	FlowStatus     string `json:"flowStatus"`
	Version        int    `json:"version"`
	Sequence       int    `json:"sequence"`
	// FlowDefinitionID is left out of events stored before definitions existed.
	FlowDefinitionID string `json:"flowDefinitionId,omitempty"`
	// Use is the use a flow.used event records.
	Use *Use `json:"use,omitempty"`
}

// Use is a flow.used event's use, without its free text.
type Use struct {
	ID             string   `json:"id"`
	DataCategories []string `json:"dataCategories"`
	UsedAt         string   `json:"usedAt"`
	// Resource is left out of the uses that are no consent token's.
	Resource string `json:"resource,omitempty"`
}

// Endpoint is the JSON body of an endpoint event: the shape of a flow
// event's, with data about the endpoint.
type Endpoint struct {
	Type      string       `json:"type"`
	Timestamp string       `json:"timestamp"`
	Data      EndpointData `json:"data"`
}

// EndpointData is an endpoint event's data.
type EndpointData struct {
	EndpointID     string `json:"endpointId"`
	OrganizationID string `json:"organizationId"`
	// URL is the endpoint's origin: its path and query may hold a secret of
	// its receiver, which the organization's other receivers must not see.
	URL          string `json:"url"`
	Reason       string `json:"reason"`
	FailingSince string `json:"failingSince"`
	DisabledAt   string `json:"disabledAt"`
}

// Time is how an event's body writes an instant: RFC 3339 in UTC with
// milliseconds, as the API does.
func Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// Origin returns the scheme and host of a URL.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Thin is the JSON body of an event sent to an endpoint that asks for thin
// events: what happened and to what, and where to read the current state,
// nothing more (no status, nothing about the flow's person).
type Thin struct {
	Type      string   `json:"type"`
	Timestamp string   `json:"timestamp"`
	Data      ThinData `json:"data"`
}

// ThinData is a thin event's data: the ids of the full event's data.
type ThinData struct {
	EventID        string    `json:"eventId"`
	OrganizationID string    `json:"organizationId"`
	FlowID         string    `json:"flowId,omitempty"`
	ReferenceID    string    `json:"referenceId,omitempty"`
	Sequence       int       `json:"sequence,omitempty"`
	EndpointID     string    `json:"endpointId,omitempty"`
	Links          ThinLinks `json:"links"`
}

// ThinLinks are the API paths, relative to flowd's base URL, that return
// the current state of what a thin event names.
type ThinLinks struct {
	Event string `json:"event"`
	Flow  string `json:"flow,omitempty"`
}

// ThinOf returns the thin body of the full body of event eventID.
func ThinOf(full []byte, eventID string) ([]byte, error) {
	var ev struct {
		Type      string   `json:"type"`
		Timestamp string   `json:"timestamp"`
		Data      ThinData `json:"data"`
	}
	if err := json.Unmarshal(full, &ev); err != nil {
		return nil, fmt.Errorf("webhooks: reading an event's body: %w", err)
	}
	d := ev.Data
	d.EventID = eventID
	d.Links = ThinLinks{Event: "/api/events/" + url.PathEscape(eventID)}
	if d.FlowID != "" {
		d.Links.Flow = "/api/flows/" + url.PathEscape(d.FlowID)
	}
	return json.Marshal(Thin{Type: ev.Type, Timestamp: ev.Timestamp, Data: d})
}
