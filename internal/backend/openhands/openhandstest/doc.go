// Package openhandstest lays out an OpenHands agent-server's storage the
// way the agent-server's own code does, for the tests of the openhands
// backend and of the CLI that drive it: one fake, so both test what the
// agent-server really leaves on disk.
package openhandstest
