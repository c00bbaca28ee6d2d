package flows

import (
	"fmt"
	"reflect"
	"testing"
)

func TestReadRoundTrips(t *testing.T) {
	tests := []struct {
		name                     string
		setting, cpus, poolConns int
		want                     int
	}{
		{"default is one per CPU", 0, 4, 8, 4},
		{"default is at least 2", 0, 1, 8, 2},
		{"setting wins over CPUs", 3, 2, 8, 3},
		{"never more than the pool", 0, 16, 8, 8},
		{"setting capped by the pool", 20, 2, 8, 8},
		{"a pool of one", 0, 2, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readRoundTrips(tt.setting, tt.cpus, tt.poolConns); got != tt.want {
				t.Fatalf("readRoundTrips(%d, %d, %d) = %d, want %d", tt.setting, tt.cpus, tt.poolConns, got, tt.want)
			}
		})
	}
}

// TestEveryFieldOfNewFlowIsTrimmed: Normalize names NewFlow's fields by
// hand, so each field is checked here by reflection: a field added to
// NewFlow and forgotten there fails this test instead of being dropped in
// silence. (The API compares a create's request for its Idempotency-Key as
// the normalized NewFlow: web/api checks that every field counts.)
func TestEveryFieldOfNewFlowIsTrimmed(t *testing.T) {
	t.Parallel()
	fields := reflect.TypeFor[NewFlow]()
	for i := range fields.NumField() {
		field := fields.Field(i)
		t.Run(field.Name, func(t *testing.T) {
			var in NewFlow
			switch field.Type.Kind() {
			case reflect.String:
				reflect.ValueOf(&in).Elem().Field(i).SetString("  value\t")
			case reflect.Int:
				reflect.ValueOf(&in).Elem().Field(i).SetInt(7)
			case reflect.Map:
				reflect.ValueOf(&in).Elem().Field(i).Set(reflect.ValueOf(map[string]string{"name": "  value\t"}))
			default:
				t.Fatalf("NewFlow.%s is a %s: teach Normalize and this test about it", field.Name, field.Type)
			}
			normalized := in.Normalize()
			if got, want := fmt.Sprint(reflect.ValueOf(normalized).Field(i)), map[reflect.Kind]string{reflect.String: "value", reflect.Int: "7",
				reflect.Map: "map[name:value]"}[field.Type.Kind()]; got != want {
				t.Errorf("Normalize made NewFlow.%s %q, want %q", field.Name, got, want)
			}
		})
	}
}
