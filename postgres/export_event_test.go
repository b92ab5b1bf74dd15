package postgres

// EventListSQL exposes EventList's statement builder to the plan tests.
var EventListSQL = eventListSQL

// ActionListSQL exposes ActionList's statement builder to the plan tests.
var ActionListSQL = actionListSQL
