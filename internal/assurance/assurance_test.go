package assurance

import "testing"

func TestACRMap(t *testing.T) {
	t.Parallel()
	m, err := ParseACRMap("substantial=idporten-loa-substantial, high=idporten-loa-high")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := m.Level("idporten-loa-high"); !ok || l != High {
		t.Errorf("Level(high) = %q %v", l, ok)
	}
	// Low is not mapped: asking for it asks for the weakest stronger level.
	if got := m.ACR(Low); got != "idporten-loa-substantial" {
		t.Errorf("ACR(low) = %q", got)
	}
	if got := m.ACR("bogus"); got != "" {
		t.Errorf("ACR of no level = %q, want none", got)
	}
	for _, bad := range []string{"low", "medium=x", "low=a,low=b", "low=a,high=a", "low="} {
		if _, err := ParseACRMap(bad); err == nil {
			t.Errorf("ParseACRMap(%q) accepted", bad)
		}
	}
	if m, err := ParseACRMap(""); err != nil || m.ACR(High) != "http://eidas.europa.eu/LoA/high" {
		t.Errorf("the default map: %v %v", m, err)
	}
}
