package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// SignatureHeader carries the HMAC-SHA256 of a generic body:
// "sha256=" and the hex digest, keyed with the target's hmacKeyFile.
const SignatureHeader = "X-Driftless-Signature"

// GenericBody is the JSON a generic target receives.
type GenericBody struct {
	Sync      string    `json:"sync"`
	Namespace string    `json:"namespace"`
	Event     Event     `json:"event"`
	Reason    string    `json:"reason"`
	Summary   string    `json:"summary"`
	Message   string    `json:"message"`
	Revision  string    `json:"revision,omitempty"`
	Time      time.Time `json:"time"`
	Count     int       `json:"count"`
}

// body words m for a target type.
func body(typ string, m Message) ([]byte, error) {
	switch typ {
	case TypeSlack:
		// Slack incoming webhook: a plain text message.
		text := "*" + m.Summary + "*"
		if m.Detail != "" {
			text += "\n" + m.Detail
		}
		return json.Marshal(map[string]string{"text": text})
	case TypeTeams:
		// Teams workflow webhook ("When a Teams webhook request is
		// received"): one Adaptive Card in attachments.
		blocks := []map[string]any{{"type": "TextBlock", "text": m.Summary, "weight": "Bolder", "wrap": true}}
		if m.Detail != "" {
			blocks = append(blocks, map[string]any{"type": "TextBlock", "text": m.Detail, "wrap": true})
		}
		return json.Marshal(map[string]any{
			"type": "message",
			"attachments": []map[string]any{{
				"contentType": "application/vnd.microsoft.card.adaptive",
				"content": map[string]any{
					"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
					"type":    "AdaptiveCard",
					"version": "1.4",
					"body":    blocks,
				},
			}},
		})
	default:
		return json.Marshal(GenericBody{Sync: m.Sync.Name, Namespace: m.Sync.Namespace, Event: m.Event, Reason: m.Reason,
			Summary: m.Summary, Message: m.Detail, Revision: m.Revision, Time: m.Time.UTC(), Count: m.Count})
	}
}

// Sign returns the X-Driftless-Signature value of body under key.
func Sign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
