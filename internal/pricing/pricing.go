// Package pricing turns the tokens an answer cost into US dollars, for
// panto usage's COST column. Prices change, and panto speaks to any
// provider, so none are built in: the table is a file the user keeps,
// in the format of LiteLLM's model_prices_and_context_window.json (the
// table most tools of this kind read), whole or in part: per model, the
// dollars per token of input, output, cache reads and cache writes.
//
// The providers count tokens differently, and a price is applied as the
// answer's wire counted them (Cost): Anthropic's input tokens leave out
// the cache's reads and writes, counted apart; OpenAI's include the
// cached ones, and its output includes the reasoning tokens.
package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/panto-dev/panto/agent"
)

// Price is what one token of each kind costs, in US dollars.
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Table is the prices by model name, as the file spells them.
type Table struct {
	prices map[string]Price
	// anyProvider is, per name without its provider prefix, the price
	// under the first prefixed key in name order: Lookup is asked once
	// per answer, and a scan of LiteLLM's thousands of keys each time
	// cost more than reading the answers.
	anyProvider map[string]Price
}

// ErrNoPrices: the file names no model with a price.
var ErrNoPrices = errors.New("no model with a price")

// Load reads a price table: a JSON object whose keys are model names
// ("claude-sonnet-4-5", or "anthropic/claude-sonnet-4-5") and whose
// values hold the costs per token; LiteLLM's other fields, and its
// entries without an input or output cost, are passed over.
func Load(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	return t, nil
}

// Parse reads a price table from data (see Load).
func Parse(data []byte) (*Table, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object of models: %w", err)
	}
	t := &Table{prices: map[string]Price{}}
	for name, v := range raw {
		if name == "sample_spec" {
			continue // LiteLLM's description of its fields
		}
		// Pointers, to tell a price of zero (a free model) from none.
		var entry struct {
			Input      *float64 `json:"input_cost_per_token"`
			Output     *float64 `json:"output_cost_per_token"`
			CacheRead  *float64 `json:"cache_read_input_token_cost"`
			CacheWrite *float64 `json:"cache_creation_input_token_cost"`
		}
		if json.Unmarshal(v, &entry) != nil || entry.Input == nil || entry.Output == nil {
			continue // image, audio and embedding models
		}
		// A cache without its own price costs what input does.
		p := Price{Input: *entry.Input, Output: *entry.Output, CacheRead: *entry.Input, CacheWrite: *entry.Input}
		if entry.CacheRead != nil {
			p.CacheRead = *entry.CacheRead
		}
		if entry.CacheWrite != nil {
			p.CacheWrite = *entry.CacheWrite
		}
		t.prices[strings.ToLower(name)] = p
	}
	if len(t.prices) == 0 {
		return nil, ErrNoPrices
	}
	t.anyProvider = map[string]Price{}
	first := map[string]string{}
	for key, p := range t.prices {
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			continue
		}
		if name := key[i+1:]; first[name] == "" || key < first[name] {
			first[name] = key
			t.anyProvider[name] = p
		}
	}
	return t, nil
}

// dated is a model name's date suffix (claude-sonnet-4-5-20250929,
// gpt-4o-2024-08-06), which a table may leave out.
var dated = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`)

// Lookup is the price of model, reached through style: its name in the
// table, else under a provider's prefix, the wire's own provider first
// ("anthropic/…", "openai/…"), then the first in name order (an
// OpenAI-compatible server's model may be anyone's); else the same for
// the name without its date suffix.
func (t *Table) Lookup(model string, style agent.APIStyle) (Price, bool) {
	model = strings.ToLower(model)
	if model == "" {
		return Price{}, false
	}
	own := map[agent.APIStyle]string{agent.APIStyleAnthropicMessages: "anthropic/", agent.APIStyleOpenAIChat: "openai/"}[style]
	for _, name := range []string{model, dated.ReplaceAllString(model, "")} {
		if p, ok := t.prices[name]; ok {
			return p, true
		}
		if p, ok := t.prices[own+name]; ok && own != "" {
			return p, true
		}
		if p, ok := t.anyProvider[name]; ok {
			return p, true
		}
	}
	return Price{}, false
}

// Cost is what an answer whose wire counted usage u cost at price p.
func (p Price) Cost(style agent.APIStyle, u agent.Usage) float64 {
	input := u.InputTokens
	if style != agent.APIStyleAnthropicMessages {
		// OpenAI's input counts the cached tokens among its own.
		input = max(0, input-u.CacheReadTokens-u.CacheWriteTokens)
	}
	return float64(input)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead + float64(u.CacheWriteTokens)*p.CacheWrite
}
