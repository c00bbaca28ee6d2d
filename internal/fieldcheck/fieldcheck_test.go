package fieldcheck

import "testing"

// TestFormattingCharactersAreRefused: the characters that reorder or hide
// text (bidirectional controls, zero-width characters, the byte order mark,
// the soft hyphen: Unicode Cf) are refused wherever control characters are,
// in texts and URLs; letters of every script, emoji and their variation
// selectors pass.
func TestFormattingCharactersAreRefused(t *testing.T) {
	t.Parallel()
	refused := map[string]rune{
		"left-to-right embedding": '\u202A', "right-to-left embedding": '\u202B', "pop directional formatting": '\u202C',
		"left-to-right override": '\u202D', "right-to-left override": '\u202E',
		"left-to-right isolate": '\u2066', "right-to-left isolate": '\u2067', "first strong isolate": '\u2068',
		"pop directional isolate": '\u2069', "left-to-right mark": '\u200E', "right-to-left mark": '\u200F',
		"Arabic letter mark": '\u061C', "zero-width space": '\u200B', "zero-width non-joiner": '\u200C',
		"zero-width joiner": '\u200D', "word joiner": '\u2060', "invisible separator": '\u2063',
		"byte order mark": '\uFEFF', "soft hyphen": '\u00AD', "interlinear annotation": '\uFFF9',
		"tag character": '\U000E0041', "line separator": '\u2028', "paragraph separator": '\u2029',
		"C1 control": '\u0085', "delete": '\x7f', "NUL": 0, "line feed": '\n', "tab": '\t',
	}
	for name, r := range refused {
		text := "Nord" + string(r) + "mann"
		if got := Text(text, 200); got != ControlOrFormatMessage {
			t.Errorf("Text with a %s (%U) = %q, want %q", name, r, got, ControlOrFormatMessage)
		}
		url := "https://bank.example/" + string(r) + "done"
		if got := URL(url, false); got == "" {
			t.Errorf("URL with a %s (%U) is accepted", name, r)
		}
	}
	for _, ok := range []string{"Nordmann", "Ærøskøbing Ålesund", "Müller-Lüdenscheidt", "Ørjasæter", "محمد", "李",
		"Sámi: Áltá Čáhcesuolu", "Loan 🏠", "❤️ (with a variation selector)", "Fjøsnaæs"} {
		if got := Text(ok, 200); got != "" {
			t.Errorf("Text(%q) = %q, want accepted", ok, got)
		}
	}
	if got := URL("https://bank.example/søknad?id=4711", false); got != "" {
		t.Errorf("a URL with letters beyond ASCII: %q", got)
	}
}
