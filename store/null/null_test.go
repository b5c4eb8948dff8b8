package null_test

import (
	"testing"

	"github.com/panto-dev/panto/agent"
	"github.com/panto-dev/panto/store/null"
	"github.com/panto-dev/panto/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:      func(t *testing.T) agent.SessionStore { return null.New() },
		Discards: true,
	})
}
