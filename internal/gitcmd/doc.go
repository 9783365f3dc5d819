// Package gitcmd runs git against repositories that an agent controls.
//
// The agent that worked in a repository can write its .git/config, its
// hooks, its .gitattributes and anything else under it, so every invocation
// is hardened. A Runner:
//
//   - starts git with a scrubbed environment: PATH is a fixed system path,
//     HOME is /nonexistent, LANG and LC_ALL are C, system and global config
//     are off (GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null,
//     GIT_ATTR_NOSYSTEM=1), prompts and optional locks are off, replace refs
//     are ignored. Nothing of the caller's environment is inherited (no
//     GIT_DIR or GIT_WORK_TREE leaks in); RunInput accepts a short allowlist
//     of extra GIT_* variables (GIT_INDEX_FILE, GIT_AUTHOR_*, ...);
//   - overrides, on the command line, every setting we know of that runs a
//     program or changes where git reads from during the commands this
//     project uses: core.fsmonitor, core.hooksPath, core.untrackedCache,
//     transports (protocol.allow=never, core.sshCommand), credential
//     helpers, askpass, diff.external, pager, editors, gpg programs and
//     signing, core.excludesFile and core.attributesFile (/dev/null: only
//     the repository's own .gitignore, .gitattributes and info/ files
//     count), auto gc and maintenance, submodule recursion, colour and diff
//     prefixes. It also passes safe.directory=*: the program usually runs
//     as another user than the agent, and the hardening above is what makes
//     reading a foreign repository's config acceptable;
//   - neutralises filter drivers. Clean filters run whenever git hashes a
//     work-tree file (git add, and git status for a tracked file whose stat
//     data no longer matches the index), smudge filters on checkout and
//     archive, and a driver can only be named by .gitattributes, which git
//     always reads from the work tree. A driver named in .gitattributes but
//     not configured does nothing, so only configured drivers matter: before
//     every command that might convert content (everything except a few
//     read-only plumbing commands, see noProbe), the Runner lists the
//     repository's effective config (git config --list -z, includes
//     followed) and sets filter.<name>.clean, .smudge and .process to the
//     empty string (which git treats as "no filter") and .required to false
//     for every driver it finds. The overrides travel in GIT_CONFIG_COUNT /
//     GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n, so driver names holding "=",
//     spaces or dots pass verbatim. Residual risk: a driver added to the
//     config between that listing and the command (a running agent racing
//     us) is not neutralised; run content-converting commands only on
//     stopped runtimes, or avoid hashing altogether as package ignored does
//     (an empty temporary index);
//   - adds --no-ext-diff --no-textconv --no-color right after the
//     subcommand for the diff family (diff, diff-files, diff-index,
//     diff-tree, log, show, format-patch, whatchanged), so diff.<driver>
//     .command and .textconv never run there. diff.external is set to
//     "false", so any other command that would run an external diff fails
//     loudly instead of running the agent's program. Options placed before
//     the subcommand disable this rewriting;
//   - bounds the run with a timeout (Runner.Timeout, default 60 s, on top of
//     the caller's context) and kills git's whole process group when it
//     expires; stdout is capped (Runner.MaxOutput).
//
// Merge drivers: the probe also sets every configured merge.<name>.driver
// to "false" (the path conflicts, nothing runs), and merge.default=text,
// merge.renormalize=false and merge.union.driver=false are pinned, so the
// simulated merges of Integrated (merged.go) are git's own text merge: a
// union merge could otherwise make a dropped change look merged.
//
// Not neutralised, because no command of this project runs them:
// blame/grep/cat-file textconv when asked for explicitly. Settings that only change output formats of porcelain
// commands (format.pretty, core.abbrev, log.*) are not pinned either:
// callers pass explicit formats.
//
// Requires git 2.36 or newer (worktree list -z, GIT_CONFIG_COUNT); 2.38
// for Integrated's simulated merges.
//
// Errors: a command that ran and failed returns *Error with its arguments
// (the caller's, without the hardening options), exit code and trimmed
// stderr; a timeout or cancellation returns *Error with ExitCode -1 that
// wraps context.DeadlineExceeded or context.Canceled; a git binary that
// cannot be started returns *Error wrapping the exec error. The helpers
// (TopLevel, Worktrees, StatusPorcelainV2, ...) wrap those as
// "verb noun: %w".
//
// Integrated (merged.go) tells whether a worktree's commits are already in
// its repository's default branch: merged, rebased (patch ids) or squashed
// (simulated merges with git merge-tree --write-tree, git 2.38 or newer,
// into a quarantine object folder). It is bounded in commits compared and
// time, and trusts the refs no more than "on a remote" does.
//
// A Runner is a value with no state; it is safe for concurrent use. Run
// never writes to the repository unless the arguments ask for it
// (--no-optional-locks keeps git status from writing back a refreshed
// index). Each Run is one git process, plus one git config --list when the
// subcommand needs the filter probe; both share the timeout.
package gitcmd
