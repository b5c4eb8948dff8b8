package main

import (
	"strings"
	"testing"

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
