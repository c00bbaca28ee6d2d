package web

import (
	"encoding/json"
	"strconv"
	"time"
)

// jsonAppender is a response body that writes its own JSON: exactly what
// encoding/json writes for it (writeJSONType's encoder: HTML-escaped, one
// trailing newline), without reflection. Only the API's busiest bodies do:
// encoding a list page by reflection, with a string made per instant, was a
// tenth of flowd's CPU for the page.
type jsonAppender interface {
	appendJSON(dst []byte) []byte
}

// apiInstant is an instant as the API writes it (apiTime).
type apiInstant time.Time

func (t apiInstant) MarshalJSON() ([]byte, error) {
	return appendInstant(nil, t), nil
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

func appendBool(dst []byte, v bool) []byte { return strconv.AppendBool(dst, v) }

func (l flowList) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"has_more":`...)
	dst = appendBool(dst, l.HasMore)
	dst = append(dst, `,"data":`...)
	if l.Data == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, f := range l.Data {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = f.appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}\n"...)
}

func (f flowListItem) appendJSON(dst []byte) []byte {
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
	dst = appendBool(dst, f.Sandbox)
	dst = append(dst, `,"archived":`...)
	dst = appendBool(dst, f.Archived)
	dst = append(dst, `,"createdAt":`...)
	dst = appendInstant(dst, f.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendInstant(dst, f.UpdatedAt)
	return append(dst, '}')
}
