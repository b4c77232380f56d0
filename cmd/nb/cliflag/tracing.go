package cliflag

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nbots/nb/tracing"
)

// StartTracing turns OpenTelemetry tracing on when the OTEL_* variables
// getenv gives ask for it (see tracing.FromEnv), reporting export
// failures to log. stop flushes the spans not yet sent (for 5 s at most)
// and is never nil.
func StartTracing(getenv func(string) string, version string, log *slog.Logger) (stop func(), err error) {
	c, err := tracing.FromEnv(getenv)
	if err != nil || c.Endpoint == "" {
		return func() {}, err
	}
	c.OnError = func(err error) { log.Warn("tracing: " + err.Error()) }
	shutdown := tracing.Enable(c, version)
	log.Info("tracing", "endpoint", tracing.Redact(c.Endpoint), "service", c.ServiceName)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn(fmt.Sprintf("tracing: spans not sent: %v", err))
		}
	}, nil
}
