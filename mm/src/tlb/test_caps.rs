//! Test configurations of the planner: the machine's fixed features and the reach of a request
//! as one value, so that a test can sweep "range ops or not" × "local or broadcast" in one loop.
//! Test builds only.

use super::{Errata, Reach, TlbFeatures, TlbPlan, TlbRequest};

/// Features plus reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Caps {
    /// FEAT_TLBIRANGE.
    pub range: bool,
    /// Broadcast (inner-shareable) forms.
    pub broadcast: bool,
    /// Errata worked around.
    pub errata: Errata,
}

impl Caps {
    /// No range ops, broadcast, no errata.
    pub const BASELINE: Self = Self { range: false, broadcast: true, errata: Errata::NONE };

    /// The same with local forms.
    pub const fn local(self) -> Self {
        Self { broadcast: false, ..self }
    }

    /// The machine features.
    pub const fn features(self) -> TlbFeatures {
        TlbFeatures { range: self.range, errata: self.errata }
    }

    /// The reach.
    pub const fn reach(self) -> Reach {
        if self.broadcast { Reach::Broadcast } else { Reach::Local }
    }
}

/// [`super::plan`] of `req` with the reach and features of `caps`.
pub(crate) fn plan(req: &TlbRequest, caps: Caps) -> TlbPlan {
    super::plan(&req.with_reach(caps.reach()), caps.features())
}
