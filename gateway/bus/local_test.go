package bus_test

import (
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/bustest"
)

func TestLocal(t *testing.T) {
	bustest.Run(t, func(t *testing.T) bus.Bus {
		b := bus.NewLocal()
		b.Retry = time.Millisecond
		return b
	})
}
