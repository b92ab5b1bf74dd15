package classify

import (
	"strings"
	"testing"
)

func TestClassValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class Class
		want  bool
	}{
		{ExactlyOnce, true},
		{AtLeastOnce, true},
		{AtMostOnce, true},
		{"", false},
		{"exactly_once", false},
		{"At-Most-Once", false},
	}
	for _, tt := range tests {
		if got := tt.class.Valid(); got != tt.want {
			t.Errorf("Class(%q).Valid() = %v, want %v", tt.class, got, tt.want)
		}
	}
}

func TestGuidance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class    Class
		contains []string
		timeout  bool // includes the generic timeout sentence
	}{
		{AtMostOnce, []string{"Nothing is sent until a person approves it.", "Do not call again for the same intent", "get_action (with wait)"}, true},
		{ExactlyOnce, []string{"in_progress", "your claim", "complete_action or fail_action", "find_actions with the intent key first"}, true},
		{AtLeastOnce, []string{"Recorded; safe to repeat."}, false},
		{"bogus", []string{"Nothing is sent until a person approves it."}, true}, // fail closed
	}
	for _, tt := range tests {
		t.Run(string(tt.class), func(t *testing.T) {
			t.Parallel()
			if text := Guidance(tt.class); strings.Contains(text, timeoutAdvice) != tt.timeout {
				t.Errorf("Guidance(%q) = %q: contains the timeout sentence %v, want %v", tt.class, text, !tt.timeout, tt.timeout)
			}
			for _, c := range tt.contains {
				if !strings.Contains(Guidance(tt.class), c) {
					t.Errorf("Guidance(%q) = %q, want it to contain %q", tt.class, Guidance(tt.class), c)
				}
			}
		})
	}
}
