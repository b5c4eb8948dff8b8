package pricing

import (
	"errors"
	"math"
	"testing"

	"github.com/panto-dev/panto/agent"
)

// TestLookup: a model by its own name, under its wire's provider before
// another's, without its date, a free one; a model the table lacks has
// no price.
func TestLookup(t *testing.T) {
	tab, err := Load("testdata/litellm-excerpt.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		style agent.APIStyle
		input float64
		ok    bool
	}{
		{"claude-sonnet-4-5", agent.APIStyleAnthropicMessages, 3e-06, true},
		{"Claude-Sonnet-4-5-20250929", agent.APIStyleAnthropicMessages, 3e-06, true},
		{"gpt-5", agent.APIStyleOpenAIChat, 1.25e-06, true},     // openai/ before azure/
		{"gpt-5", agent.APIStyleAnthropicMessages, 9e-06, true}, // a proxy's: the first in name order
		{"gpt-5-2025-08-07", agent.APIStyleOpenAIChat, 1.25e-06, true},
		{"llama3.2", agent.APIStyleOpenAIChat, 0, true},
		{"dall-e-3", agent.APIStyleOpenAIChat, 0, false},
		{"sample_spec", agent.APIStyleOpenAIChat, 0, false},
		{"model-x", agent.APIStyleOpenAIChat, 0, false},
		{"", agent.APIStyleOpenAIChat, 0, false},
	} {
		p, ok := tab.Lookup(tc.model, tc.style)
		if ok != tc.ok || p.Input != tc.input {
			t.Errorf("Lookup(%q, %s) = %+v, %v; want input %g, %v", tc.model, tc.style, p, ok, tc.input, tc.ok)
		}
	}
	if p, _ := tab.Lookup("openai/gpt-5", ""); p.CacheWrite != 1.25e-06 {
		t.Errorf("a cache write without its own price costs %g, want the input's", p.CacheWrite)
	}
}

// TestCost: each wire's tokens priced as it counted them.
func TestCost(t *testing.T) {
	p := Price{Input: 3e-06, Output: 1.5e-05, CacheRead: 3e-07, CacheWrite: 3.75e-06}
	u := agent.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 600, CacheWriteTokens: 100, ReasoningTokens: 50}
	for _, tc := range []struct {
		style agent.APIStyle
		want  float64
	}{
		// Anthropic: input apart from the cache's reads and writes.
		{agent.APIStyleAnthropicMessages, 1000*3e-06 + 200*1.5e-05 + 600*3e-07 + 100*3.75e-06},
		// OpenAI: the cached tokens are among the input, the
		// reasoning among the output.
		{agent.APIStyleOpenAIChat, 300*3e-06 + 200*1.5e-05 + 600*3e-07 + 100*3.75e-06},
	} {
		if got := p.Cost(tc.style, u); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: cost %g, want %g", tc.style, got, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, data := range []string{`[]`, `{"a": 1}`, `{"dall-e-3": {"output_cost_per_pixel": 0}}`, `not json`} {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("Parse(%s) took it", data)
		} else if data != `not json` && data != `[]` && !errors.Is(err, ErrNoPrices) {
			t.Errorf("Parse(%s): %v, want ErrNoPrices", data, err)
		}
	}
}
