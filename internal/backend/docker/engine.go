package docker

import "github.com/reclaimer/reclaimer/internal/backend"

// StateOf maps an Engine container state to a runtime state: a paused
// container counts as running (its processes and open files stay).
// Exported for the backends whose runtimes are containers too (openhands).
func StateOf(engineState string) backend.State { return state(engineState) }

// Active tells whether an Engine state means the container has processes.
func Active(engineState string) bool { return activeState(engineState) }

// Overlaps tells whether two clean paths are the same folder or one holds
// the other: a mount of either makes the other in use.
func Overlaps(a, b string) bool { return overlaps(a, b) }
