package cli

import (
	"github.com/reclaimer/reclaimer/internal/config"
	"github.com/reclaimer/reclaimer/internal/engine"
	"github.com/reclaimer/reclaimer/internal/sources"
)

// buildSources turns the configuration's source tables into backends with
// their effective policies.
func buildSources(cfg *config.Config) ([]engine.Source, error) { return sources.Build(cfg) }
