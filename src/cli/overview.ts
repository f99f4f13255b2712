import { DEFAULT_SOCKET } from '../api/client.js';
import { DEFAULT_OWNER_TOKEN_FILE } from './credentials.js';

/** `nas --help`: every command on one screen. Each family's own help is next to its commands. */
export const OVERVIEW = `usage: nas [--socket PATH] [--json] <command> ...

commands:
  run <role> [--user U] [--intent T] [--ttl 48h] [--budget 50M] [--cwd P] [--attempts N] [--env NAME] -- CMD [ARG]...
                                            run a command in its own branch at <mount>/<role>, propose its work
  run list <role>                           runs: id, task, branch, user, state, exit, PR
  run pick <role> <task> <run>              owner: merge one attempt of a task, recycle the others
  checkpoint create <role>[@<branch>] <name> [--message M]
                                            name a commit for good; checkpoint list <role>, delete (owner)
  restore <role>@<branch> <checkpoint|commit> [--path P]...
                                            return files to that state as a new commit (replaced: recycle area)
  log <role>[@<branch>] [PATH] [--limit N]  history with who and why (Nas-* trailers)
  diff <role>[@<branch>] [A] [B] [--path P] changes between checkpoints or commits (default: since the fork)
  status                                    what nasd serves
  home create <role> [--template default]   create a Home from a template
  home list                                 list Homes, their branches and metadata problems
  home config <role> <.nas/file> [--from F] owner: propose a new .nas/ file (checked first; the PR waits)
  home archive <role>                       owner: unmount and keep (home unarchive <role> brings it back)
  home retire <role> --successor <role2>    owner: hand reviewed notes and skills to the successor (a PR), stop
  export <role> <file>                      owner: the whole Home in one file (a git bundle of every ref)
  import <file> [--as <role>]               owner: a Home from such a file, every ref as it was (its leases ended)
  branch create <role>/<branch> [--from main] [--ttl 48h] [--run ID]
                                            create a writable branch view <mount>/<role>@<branch>
  branch list <role>                        list a Home's branches
  branch extend <role>/<branch> --ttl 24h   owner: expire that long from now (an expired branch: writable again)
  branch update <role>/<branch>             merge main into the branch (conflicts: markers in the file, listed)
  sync <role>[/<branch>]                    commit everything pending now, and wait for it
  why [<path>] [--limit N]                  why the mount refused something there: reasons, what to do instead
  trash list <role>                         the recycle area: what was deleted, where, when
  trash restore <role> <path> [--branch B] [--to P] [--id ID]
                                            bring a deleted path back into a branch
  trash purge <role> [--older-than 7d]      owner: remove older deletions for good (default trash_keep_days)
  share smb [--print] [--smb-conf FILE]     share the Homes over SMB: print or install Samba's [agents] section
  remote add <role> <git-url>               owner: mirror every ref to a git server; remote list, remote remove
  cluster status                            etcd, the hosts, and each Home's merge writer, main and queue (several hosts)
  maintenance run [<role>]                  owner: expired branches, recycle window, stale PRs, git pack; a report
  memory check <role>[@<branch>]            budgets, indexes and trust labels; exit 1 on any error
  memory index <role>@<branch> [--check]    regenerate the topic index blocks (--check: only report)
  memory measure <role>[@<branch>] [--task PATH]...
                                            bytes and o200k_base tokens of the start set and a task
  memory review <role> <note> [--description TEXT]
                                            owner: label a note reviewed (quarantine -> notes/) on main
  memory import <role>@<branch> <file>...   bring notes from another framework into quarantine, unreviewed
  lease issue <role>/<branch> --principal P [--ttl 2h] [--scopes write,propose:main] [--budget BYTES]
                                            grant a run its branch; prints the token (with $NAS_LEASE: a sub-lease)
  lease list <role>                         leases with status; lease revoke <role> <id> (owner)
  propose <role>/<branch> --into main --intent TEXT [--checks links,schema,memory,journal]
                                            commit, diff, check, and merge or wait for the owner
  pr list <role>                            PRs: id, branch, state, checks, intent
  pr inbox                                  what waits for a person, in every Home, oldest first
  web open                                  owner: a one-time login link for the review web page
  pr show <role> <id>                       diff, intent, provenance, checks, trust labels, reads
  pr approve <role> <id>                    owner: merge a waiting PR; pr reject <role> <id> --why TEXT
  pr stats <role>                           merged by policy, approved, rejected, waiting
  branch discard <role>/<branch>            move a branch's work to the recycle area and remove it
  context <role>[@<branch>]                 READ-ON-START and READ-ON-DEMAND paths for a session-start hook
  briefing <role>[@<branch>] [--max-tokens 2000]
                                            the token-capped boot view
  hook session-start [<role>[@<branch>]]    what an agent's session-start hook prints (inside nas run: no args)

credentials: $NAS_LEASE (a lease token); the owner's, read from ${DEFAULT_OWNER_TOKEN_FILE} when run as root
  (or $NAS_OWNER_TOKEN_FILE, $NAS_OWNER_TOKEN): approve, reject, review, revoke and top-level leases need it.

options:
  --socket PATH   nasd's control socket (default $NAS_SOCKET or ${DEFAULT_SOCKET})
  --json          print the daemon's answer as JSON
  --help          this text; "nas <command> --help" for one command
  --version       nas's version
`;
