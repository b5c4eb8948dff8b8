package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/panto-dev/panto/agent"
)

func TestNewProvider(t *testing.T) {
	t.Parallel()
	envOf := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name     string
		cfg      providerConfig
		env      func(string) string
		wantErr  string
		identity agent.WireIdentity
	}{
		{"openai default needs a key", providerConfig{Style: agent.APIStyleOpenAIChat}, envOf(), "set PANTO_API_KEY or OPENAI_API_KEY", agent.WireIdentity{}},
		{"anthropic default needs a key", providerConfig{Style: agent.APIStyleAnthropicMessages}, envOf("OPENAI_API_KEY", "k"), "set PANTO_API_KEY or ANTHROPIC_API_KEY", agent.WireIdentity{}},
		{"openai key", providerConfig{Style: agent.APIStyleOpenAIChat}, envOf("OPENAI_API_KEY", "k"), "",
			agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "https://api.openai.com/v1", Model: defaultOpenAIModel}},
		{"panto key for anthropic", providerConfig{Style: agent.APIStyleAnthropicMessages, Reasoning: agent.ReasoningHigh}, envOf("PANTO_API_KEY", "k"), "",
			agent.WireIdentity{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "https://api.anthropic.com", Model: defaultAnthropicModel, Reasoning: agent.ReasoningHigh}},
		{"local server without key", providerConfig{Style: agent.APIStyleOpenAIChat, BaseURL: "http://localhost:8080/v1/", Model: "llama"}, envOf(), "",
			agent.WireIdentity{APIStyle: agent.APIStyleOpenAIChat, BaseURL: "http://localhost:8080/v1", Model: "llama"}},
		{"unknown style", providerConfig{Style: "gemini"}, envOf("PANTO_API_KEY", "k"), "--api-style", agent.WireIdentity{}},
		{"bad reasoning", providerConfig{Style: agent.APIStyleOpenAIChat, Reasoning: "max"}, envOf("PANTO_API_KEY", "k"), "--reasoning", agent.WireIdentity{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newProvider(tt.cfg, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Identity(); got != tt.identity {
				t.Errorf("identity = %+v, want %+v", got, tt.identity)
			}
		})
	}
}

func TestInherit(t *testing.T) {
	t.Parallel()
	info := agent.SessionInfo{APIStyle: agent.APIStyleAnthropicMessages, BaseURL: "http://h", Model: "m", Reasoning: agent.ReasoningLow}
	tests := []struct {
		name     string
		cfg      providerConfig
		explicit map[string]bool
		want     providerConfig
	}{
		{"nothing given", providerConfig{Style: agent.APIStyleOpenAIChat}, map[string]bool{},
			providerConfig{Style: agent.APIStyleAnthropicMessages, BaseURL: "http://h", Model: "m", Reasoning: agent.ReasoningLow}},
		{"model given", providerConfig{Style: agent.APIStyleOpenAIChat, Model: "other"}, map[string]bool{"model": true},
			providerConfig{Style: agent.APIStyleAnthropicMessages, BaseURL: "http://h", Model: "other", Reasoning: agent.ReasoningLow}},
		{"other style given", providerConfig{Style: agent.APIStyleOpenAIChat}, map[string]bool{"api-style": true},
			providerConfig{Style: agent.APIStyleOpenAIChat}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.inherit(info, tt.explicit)
			if cfg != tt.want {
				t.Errorf("got %+v, want %+v", cfg, tt.want)
			}
		})
	}
}

// TestResolvedFirst: the sessions a command resolves right after opening
// the store, which a bucket lists with Open's requests
// (backends.Options.ResolveAhead): show's, export's, fork's and title's
// first argument, every argument of rm, the session -r names; nothing
// for the others.
func TestResolvedFirst(t *testing.T) {
	var got []string
	action := func(c *cli.Context) error { got = resolvedFirst(c); return nil }
	app := &cli.App{
		Flags:  []cli.Flag{&cli.StringFlag{Name: "resume", Aliases: []string{"r"}}},
		Action: action,
	}
	for _, name := range []string{"show", "export", "fork", "title", "rm", "sessions", "search"} {
		app.Commands = append(app.Commands, &cli.Command{Name: name, Action: action})
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", "3f9a"}, []string{"3f9a"}},
		{[]string{"title", "3f9a", "a new title"}, []string{"3f9a"}},
		{[]string{"fork", "3f9a"}, []string{"3f9a"}},
		{[]string{"export", "3f9a"}, []string{"3f9a"}},
		{[]string{"rm", "3f9a", "71c0"}, []string{"3f9a", "71c0"}},
		{[]string{"-r", "3f9a"}, []string{"3f9a"}},
		{[]string{"show"}, nil},
		{[]string{"sessions"}, nil},
		{[]string{"search", "3f9a"}, nil},
		{nil, nil},
	} {
		got = []string{"unset"}
		if err := app.Run(append([]string{"panto"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("panto %q resolves %q first, want %q", c.args, got, c.want)
		}
	}
}
