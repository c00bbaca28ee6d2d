package api

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/flowd/flowd/web/internal/httpkit"
)

// The API's busiest bodies write their own JSON (httpkit.JSONAppender).
var (
	_ httpkit.JSONAppender = flowList{}
	_ httpkit.JSONAppender = flowEnvelope{}
)

// apiInstant is an instant as the API writes it (apiTime).
type apiInstant time.Time

func (t apiInstant) MarshalJSON() ([]byte, error) {
	return appendInstant(nil, t), nil
}

// UnmarshalJSON reads an RFC 3339 instant, for clients of the API's types
// such as `flowd definitions --json` readers.
func (t *apiInstant) UnmarshalJSON(b []byte) error {
	return (*time.Time)(t).UnmarshalJSON(b)
}

func appendInstant(dst []byte, t apiInstant) []byte {
	dst = append(dst, '"')
	dst = appendTime(dst, time.Time(t))
	return append(dst, '"')
}

// appendString appends s as a JSON string, as encoding/json writes it.
// Strings of plain printable ASCII (ids, statuses, most references) are
// copied as they are; anything else goes through encoding/json.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func (l flowList) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"has_more":`...)
	dst = strconv.AppendBool(dst, l.HasMore)
	dst = append(dst, `,"data":`...)
	if l.Data == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, f := range l.Data {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = f.AppendJSON(dst)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}\n"...)
}

func (f flowListItem) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, f.ID)
	dst = append(dst, `,"nationalId":`...)
	dst = appendString(dst, f.NationalID)
	dst = append(dst, `,"organizationId":`...)
	dst = appendString(dst, f.OrganizationID)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, f.Status)
	dst = append(dst, `,"referenceId":`...)
	dst = appendString(dst, f.ReferenceID)
	dst = append(dst, `,"flowNumber":`...)
	dst = strconv.AppendInt(dst, f.FlowNumber, 10)
	dst = append(dst, `,"sandbox":`...)
	dst = strconv.AppendBool(dst, f.Sandbox)
	dst = append(dst, `,"archived":`...)
	dst = strconv.AppendBool(dst, f.Archived)
	dst = append(dst, `,"createdAt":`...)
	dst = appendInstant(dst, f.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendInstant(dst, f.UpdatedAt)
	dst = append(dst, `,"flowDefinitionId":`...)
	dst = appendString(dst, f.FlowDefinitionID)
	return append(dst, '}')
}

func (e flowEnvelope) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"_links":{"self":`...)
	dst = appendString(dst, e.Links.Self)
	dst = append(dst, `,"tasks":{"href":`...)
	dst = appendString(dst, e.Links.Tasks.Href)
	dst = append(dst, `},"consent":{"href":`...)
	dst = appendString(dst, e.Links.Consent.Href)
	dst = append(dst, `}},"flow":`...)
	dst = e.Flow.AppendJSON(dst)
	return append(dst, "}\n"...)
}

func (d flowDetail) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"flowId":`...)
	dst = appendString(dst, d.FlowID)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(d.Version), 10)
	dst = append(dst, `,"hasErrors":`...)
	dst = strconv.AppendBool(dst, d.HasErrors)
	dst = append(dst, `,"hasIncidents":`...)
	dst = strconv.AppendBool(dst, d.HasIncidents)
	dst = append(dst, `,"incidents":`...)
	dst = appendIncidents(dst, d.Incidents)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, d.Status)
	dst = append(dst, `,"consent":{"status":`...)
	dst = appendString(dst, d.Consent.Status)
	dst = append(dst, `,"openedAt":`...)
	dst = appendInstantOrNull(dst, d.Consent.OpenedAt)
	dst = append(dst, `,"decidedAt":`...)
	dst = appendInstantOrNull(dst, d.Consent.DecidedAt)
	dst = append(dst, `,"withdrawnAt":`...)
	dst = appendInstantOrNull(dst, d.Consent.WithdrawnAt)
	dst = append(dst, `,"expiresAt":`...)
	dst = appendInstant(dst, d.Consent.ExpiresAt)
	dst = append(dst, `,"textSha256":`...)
	dst = appendStringOrNull(dst, d.Consent.TextSHA256)
	dst = append(dst, `,"language":`...)
	dst = appendStringOrNull(dst, d.Consent.Language)
	dst = append(dst, `,"assuranceLevel":`...)
	dst = appendStringOrNull(dst, d.Consent.AssuranceLevel)
	dst = append(dst, `,"validUntil":`...)
	dst = appendInstantOrNull(dst, d.Consent.ValidUntil)
	dst = append(dst, `,"expiredAt":`...)
	dst = appendInstantOrNull(dst, d.Consent.ExpiredAt)
	dst = append(dst, `,"lastUsedAt":`...)
	dst = appendInstantOrNull(dst, d.Consent.LastUsedAt)
	dst = append(dst, `,"numUses":`...)
	dst = strconv.AppendInt(dst, int64(d.Consent.NumUses), 10)
	dst = append(dst, `},"createdAt":`...)
	dst = appendInstant(dst, d.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendInstant(dst, d.UpdatedAt)
	dst = append(dst, `,"numAttachments":`...)
	dst = strconv.AppendInt(dst, int64(d.NumAttachments), 10)
	dst = append(dst, `,"_meta":{"processDefinitionId":`...)
	dst = appendString(dst, d.Meta.ProcessDefinitionID)
	dst = append(dst, `,"processInstanceId":`...)
	dst = appendString(dst, d.Meta.ProcessInstanceID)
	dst = append(dst, `,"processVersion":`...)
	dst = appendString(dst, d.Meta.ProcessVersion)
	dst = append(dst, `},"flowDefinitionId":`...)
	dst = appendString(dst, d.FlowDefinitionID)
	dst = append(dst, `,"flowNumber":`...)
	dst = strconv.AppendInt(dst, d.FlowNumber, 10)
	dst = append(dst, `,"referenceId":`...)
	dst = appendString(dst, d.ReferenceID)
	dst = append(dst, `,"referenceName":`...)
	dst = appendStringOrNull(dst, d.ReferenceName)
	dst = append(dst, `,"versionTag":`...)
	dst = appendStringOrNull(dst, d.VersionTag)
	dst = append(dst, `,"sandbox":`...)
	dst = strconv.AppendBool(dst, d.Sandbox)
	dst = append(dst, `,"sandboxConfig":`...)
	dst = append(dst, "{}"...) // struct{}: no sandbox settings exist yet
	dst = append(dst, `,"data":{"nationalId":`...)
	dst = appendString(dst, d.Data.NationalID)
	dst = append(dst, `,"lastName":`...)
	dst = appendString(dst, d.Data.LastName)
	dst = append(dst, `,"redirectUrl":`...)
	dst = appendString(dst, d.Data.RedirectURL)
	dst = append(dst, `,"webhookUrl":`...)
	dst = appendString(dst, d.Data.WebhookURL)
	dst = append(dst, `,"organizationNumber":`...)
	dst = appendString(dst, d.Data.OrganizationNumber)
	dst = append(dst, `},"parameters":`...)
	dst = appendStringMap(dst, d.Parameters)
	dst = append(dst, `,"actions":`...)
	dst = appendStrings(dst, d.Actions)
	return append(dst, '}')
}

// appendStringMap writes m in the order of its keys, as encoding/json
// orders a map's keys.
func appendStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

// appendIncidents writes a flow's incidents by id, in the order of their
// ids, as encoding/json orders a map's keys.
func appendIncidents(dst []byte, incidents map[string]incidentJSON) []byte {
	if incidents == nil {
		return append(dst, "null"...)
	}
	ids := slices.Sorted(maps.Keys(incidents))
	dst = append(dst, '{')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		in := incidents[id]
		dst = appendString(dst, id)
		dst = append(dst, `:{"id":`...)
		dst = appendString(dst, in.ID)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, in.Message)
		dst = append(dst, `,"taskType":`...)
		dst = appendString(dst, in.TaskType)
		dst = append(dst, `,"taskCategory":`...)
		dst = appendString(dst, in.TaskCategory)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendInstantOrNull(dst []byte, t *apiInstant) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	return appendInstant(dst, *t)
}

func appendStringOrNull(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *s)
}

func appendStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}
