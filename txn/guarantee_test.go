package txn

import "testing"

func TestParseGuarantee(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce, AtMostOnce} {
		got, err := ParseGuarantee(g.String())
		if err != nil || got != g {
			t.Errorf("ParseGuarantee(%q) = %v, %v", g.String(), got, err)
		}
	}
	if _, err := ParseGuarantee("exactly-once"); err == nil {
		t.Error("a misspelt guarantee was accepted")
	}
}
