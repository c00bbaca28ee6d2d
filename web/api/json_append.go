package api

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/flowd/flowd/web/internal/httpkit"
)

// The API's busiest body, a page of flows, writes its own JSON
// (httpkit.JSONAppender).
var (
	_ httpkit.JSONAppender = flowList{}
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
