//! The overall code from the descriptors' codes (`docs/design/contract.md#overall-code`): a
//! regular descriptor over its limit denies the request; quota descriptors deny it only together.
//! Go's rule is that the request is over when every quota descriptor is over. `quota_group`
//! (a ratelimitd extension) refines it: the quota descriptors naming one group act as one quota
//! that is over when any of its members is (a tenant's budget on a model and the model's own
//! budget are both needed to use that model), and the request is over when every such quota —
//! each group, and each quota descriptor outside any group — is over (no model has budget left).
//! Without groups this is exactly Go's rule.

use super::response::Code;

/// How one descriptor takes part in the overall code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role<'a> {
    /// Unlimited: never counted.
    Skipped,
    /// A regular descriptor: over its limit, it denies the request.
    Regular,
    /// A quota descriptor, in the named `quota_group` or (`None`) on its own.
    Quota(Option<&'a str>),
}

/// `OVER_LIMIT` when a regular descriptor is over, or when there are quotas and every one is over;
/// `descriptors` gives each descriptor's role and whether its status is `OVER_LIMIT`.
pub(crate) fn overall<'a>(descriptors: impl IntoIterator<Item = (Role<'a>, bool)>) -> Code {
    // Groups seen so far and whether a member is over. A request has few descriptors (the
    // request limits bound them), so a list beats a map.
    let mut groups: Vec<(&str, bool)> = Vec::new();
    let (mut regular_over, mut alone, mut alone_over) = (false, 0usize, 0usize);
    for (role, over) in descriptors {
        match role {
            Role::Skipped => {}
            Role::Regular => regular_over |= over,
            Role::Quota(None) => {
                alone += 1;
                alone_over += usize::from(over);
            }
            Role::Quota(Some(name)) => match groups.iter_mut().find(|(g, _)| *g == name) {
                Some((_, any_over)) => *any_over |= over,
                None => groups.push((name, over)),
            },
        }
    }
    let quotas = alone + groups.len();
    let every_quota_over = alone_over == alone && groups.iter().all(|(_, over)| *over);
    if regular_over || (quotas > 0 && every_quota_over) {
        Code::OverLimit
    } else {
        Code::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::Role::{Quota, Regular, Skipped};
    use super::*;

    const OVER: Code = Code::OverLimit;
    const OK: Code = Code::Ok;

    #[test]
    fn without_groups_it_is_gos_rule() {
        assert_eq!(overall([]), OK);
        assert_eq!(overall([(Regular, false), (Regular, true)]), OVER);
        assert_eq!(overall([(Quota(None), true), (Quota(None), false)]), OK);
        assert_eq!(overall([(Quota(None), true), (Quota(None), true)]), OVER);
        // A regular descriptor still denies whatever the quotas say.
        assert_eq!(overall([(Quota(None), false), (Regular, true)]), OVER);
        // An unlimited descriptor is not a quota left over.
        assert_eq!(overall([(Quota(None), true), (Skipped, false)]), OVER);
        assert_eq!(overall([(Skipped, false)]), OK);
    }

    #[test]
    fn one_member_over_makes_its_group_over() {
        let tenant_over = [(Quota(Some("gpt")), true), (Quota(Some("gpt")), false)];
        assert_eq!(overall(tenant_over), OVER);
        let both_under = [(Quota(Some("gpt")), false), (Quota(Some("gpt")), false)];
        assert_eq!(overall(both_under), OK);
    }

    #[test]
    fn separate_groups_deny_only_when_every_group_is_over() {
        // gpt's tenant budget is spent, claude still has room: the request may use claude.
        let one_left = [
            (Quota(Some("gpt")), true),
            (Quota(Some("gpt")), false),
            (Quota(Some("claude")), false),
            (Quota(Some("claude")), false),
        ];
        assert_eq!(overall(one_left), OK);
        let none_left = [
            (Quota(Some("gpt")), false),
            (Quota(Some("gpt")), true),
            (Quota(Some("claude")), true),
            (Quota(Some("claude")), false),
        ];
        assert_eq!(overall(none_left), OVER);
    }

    #[test]
    fn a_quota_outside_any_group_is_a_group_of_its_own() {
        assert_eq!(
            overall([(Quota(Some("gpt")), true), (Quota(None), false)]),
            OK
        );
        assert_eq!(
            overall([(Quota(Some("gpt")), true), (Quota(None), true)]),
            OVER
        );
        assert_eq!(
            overall([(Quota(Some("gpt")), false), (Quota(None), true)]),
            OK
        );
    }
}
