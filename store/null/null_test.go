package null_test

import (
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/storetest"
	"github.com/panto-dev/panto/store/null"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:      func(t *testing.T) agent.SessionStore { return null.New() },
		Discards: true,
	})
}
