// SPDX-License-Identifier: MIT
// Stands in for <infiniband/verbs.h> where no application header may need it.
#error "an installed header includes <infiniband/verbs.h>: applications must not need it"
