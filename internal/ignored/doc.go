// Package ignored selects the `dependencies` of a workspace: the
// git-ignored directories that can be shed whole because the project can
// rebuild them (node_modules, .venv, dist, target, ...).
//
// Select looks in the workspace, when it is the top level of a work tree
// (a main one or a linked worktree), and in each of its direct children
// that is one (nested clones, submodules). A workspace that is no git
// repository and has no such child sheds nothing; a folder inside someone
// else's repository is not a repository of its own. In each repository it
// asks git
//
//	git status --porcelain=v2 -z --ignored=matching --untracked-files=all
//	           --ignore-submodules=all --no-renames
//
// and takes an entry only when all of these hold:
//
//   - it is an ignored directory ("! dir/"). With --ignored=matching git
//     prints a directory as "dir/" only when the directory itself matches
//     an ignore pattern, and then does not look inside: by git's rules a
//     file inside an excluded directory cannot be re-included, so every
//     entry in it is ignored by virtue of that match. A directory that
//     merely holds ignored files ("logs/" with "*.log") is printed file by
//     file and never taken, and neither are ignored files (".env"),
//     wherever they are. (git ls-files --others --ignored --directory would
//     print "logs/" and every parent whose contents happen to be all
//     ignored: that over-reporting is why it is not used.)
//   - nothing in it is tracked (a force-added file, a submodule); such a
//     directory is kept whole, ignored directories inside it included;
//   - no anchored negation pattern in an ignore file git read could name
//     something inside it. git does not re-include "build/keep.txt" under
//     "build/" + "!build/keep.txt" (documented in gitignore(5)), but the
//     line shows the user wants that file, so build/ is kept. Unanchored
//     negations ("!.gitkeep", "!.env.example") are not taken into account:
//     they may match at any depth, would veto nearly every directory, and
//     git ignores them inside an excluded directory;
//   - it and every directory between the repository and it are real
//     directories, not symbolic links (a link is never followed), and its
//     path from git is a plain downward path with no ".git" component;
//   - it lies strictly inside the workspace and the managed root
//     (lexically, on cleaned absolute paths; the workspace itself must be
//     reached from the root without a symbolic link, and a path with ".."
//     is refused);
//   - it is rebuildable, a positive test (rebuildable.go): no ".git" (file
//     or directory: a clone, a submodule, a worktree) exists anywhere in it,
//     at any depth, nor a mount point or a folder that cannot be read; and
//     either its name is a known dependency or build output
//     (Options.Rebuildable, default DefaultRebuildable: node_modules, .venv,
//     venv, target, build, dist, .gradle, __pycache__, .next, ...), or no
//     entry in it, itself included, matches the keep list (Options.Keep,
//     default DefaultKeep: .env*, *.pem, *credentials*, *.tfstate*, id_*,
//     *.key, ...). Anything else is kept and reported through
//     Options.Kept with why. Checking costs one walk of the folder's names
//     (no stat): about 12% more for a Select over the recorded
//     node_modules shape (docs/benchmarks.md).
//
// Only the top-most of the selected directories are returned. What counts
// as ignored is the repository's own .gitignore files and info/exclude:
// gitcmd points core.excludesFile at /dev/null, so neither a user's global
// excludes nor one the agent names in the repository config apply (that
// errs towards shedding less).
//
// The OpenHands reclaimer's unit case "public/locales/**/* sheds only
// public" comes from ls-files --directory: for a repository whose public/
// holds only public/locales/{en/ns/a.json,fr/a.json,index.json} it prints
// public/, public/locales/, public/locales/en/, public/locales/fr/ and
// public/locales/index.json, and the top-most of those is public/, which
// takes the ignored file index.json and two directories that are not
// ignored at all. git status --ignored=matching prints public/locales/en/,
// public/locales/fr/ (the pattern matches those directories themselves)
// and public/locales/index.json. So here that pattern sheds exactly
// public/locales/en and public/locales/fr and keeps public/,
// public/locales/ and public/locales/index.json.
//
// Hardening: git runs through gitcmd.Runner, and the status runs against an
// empty temporary index (GIT_INDEX_FILE), so git compares no work-tree file
// with an index entry, hashes nothing, and no clean filter can run even if
// the agent rewrites the config while Select runs; tracked paths come from
// git ls-files on the real index, which reads without hashing. Select
// writes nothing into the repository.
//
// Errors: an invalid Options or a workspace outside the root
// (beneath.ErrOutside) or reached through a symbolic link
// (beneath.ErrSymlink) is an error; a missing workspace is not (nothing to
// shed). git failing in a repository (timeout, corrupt repository, a
// ".git" git cannot read) returns an error naming that repository and no
// directories: the caller skips the runtime. Select holds no state and is
// safe for concurrent use; it only reads, so it can run outside a
// runtime's lock, and the caller must re-check (and trash refuses links
// and mount points) when it acts. Sizes are measured by the caller.
package ignored
