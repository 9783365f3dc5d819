package engine_test

import (
	"github.com/reclaimer/reclaimer/internal/backend"
	"github.com/reclaimer/reclaimer/internal/ledger"
)

func toLedger(k backend.Key) ledger.Key { return ledger.Key{Backend: k.Backend, ID: k.ID} }
