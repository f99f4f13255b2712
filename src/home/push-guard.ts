/**
 * The Store's pre-receive hook: main and nasd's own records (refs/nas/...) change only through nasd, so that
 * every change to main is a reviewed merge; a branch that exists is its view's (a push under it would stop the
 * view's commits); and a new branch pushed by git would have no record, no TTL and no view (it would never show
under the mount), so it is refused too, naming \`nas branch create\`. Tags are let through. nasd writes with libgit2,
 * which runs no hooks. The operator's override for a push they have reviewed is an environment variable (a
 * local `git push` passes its environment to the hook), or removing the file.
 */
export const PRE_RECEIVE = `#!/bin/sh
# Installed by nasd (agent-nas): main and refs/nas/* change only through nasd, as reviewed merges.
# Operator override, for a push you have reviewed: NAS_OPERATOR_PUSH=1 git push ...
[ "$NAS_OPERATOR_PUSH" = 1 ] && exit 0
zero=0000000000000000000000000000000000000000
role=$(basename "$(pwd)" .git)
refused=0
while read -r old new ref; do
  case "$ref" in
    refs/heads/main|refs/nas/*)
      echo "agent-nas: $ref changes only through nasd (nas propose, then nas pr approve)." >&2
      refused=1 ;;
    refs/heads/*)
      if [ "$old" != "$zero" ]; then
        echo "agent-nas: $ref exists and is written through its view in the mount, not by git push." >&2
      else
        echo "agent-nas: $ref would be a branch with no record, no TTL and no view under the mount, so it is refused;" >&2
        echo "agent-nas: make one with nas branch create $role/\${ref#refs/heads/} and write through its view, $role@\${ref#refs/heads/} under the mount." >&2
      fi
      refused=1 ;;
  esac
done
[ $refused = 0 ] || echo "agent-nas: an operator who has reviewed this push can set NAS_OPERATOR_PUSH=1 (see docs/security.md)." >&2
exit $refused
`;
