package v1alpha1

// AgentExtraKey and AgentExtraValue are the user extra the agent's
// clients add when they impersonate a Sync's ServiceAccount
// (Impersonate-Extra-agent.driftless.dev: true). A person who holds the
// ServiceAccount's token (kubectl create token) writes as the same user
// but without it, unless allowed to impersonate userextras/
// agent.driftless.dev as well.
const (
	AgentExtraKey   = "agent.driftless.dev"
	AgentExtraValue = "true"
)
