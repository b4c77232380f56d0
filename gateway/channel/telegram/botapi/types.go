// Package botapi is a client of Telegram's Bot API
// (https://core.telegram.org/bots/api) and its types: the methods the
// gateway's Telegram channel calls, with the API's errors as values and
// the bot token kept out of every error. The fake server of the tests
// speaks the same types.
package botapi

// User is a Telegram user or bot.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// Chat types.
const (
	Private     = "private"
	Group       = "group"
	Supergroup  = "supergroup"
	ChannelChat = "channel"
)

// Chat is a private chat, a group, a supergroup or a channel.
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
}

// MessageEntity is a formatted range of a message's text: Offset and
// Length count UTF-16 code units.
type MessageEntity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	User     *User  `json:"user,omitempty"`
	Language string `json:"language,omitempty"`
}

// PhotoSize is one size of a photo.
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Voice is a voice note.
type Voice struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Audio is a music file; Document a general file. The channel takes both
// as media like a voice note.
type Audio = Voice

// Document is a general file.
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Message is a message in a chat.
type Message struct {
	MessageID       int64           `json:"message_id"`
	From            *User           `json:"from,omitempty"`
	Chat            Chat            `json:"chat"`
	Date            int64           `json:"date"`
	EditDate        int64           `json:"edit_date,omitempty"`
	ReplyToMessage  *Message        `json:"reply_to_message,omitempty"`
	Text            string          `json:"text,omitempty"`
	Entities        []MessageEntity `json:"entities,omitempty"`
	Caption         string          `json:"caption,omitempty"`
	CaptionEntities []MessageEntity `json:"caption_entities,omitempty"`
	Photo           []PhotoSize     `json:"photo,omitempty"`
	Voice           *Voice          `json:"voice,omitempty"`
	Audio           *Audio          `json:"audio,omitempty"`
	Document        *Document       `json:"document,omitempty"`
}

// Update is one event of getUpdates.
type Update struct {
	UpdateID int64    `json:"update_id"`
	Message  *Message `json:"message,omitempty"`
}

// File is a file ready to download from FileURL(FilePath).
type File struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	FilePath     string `json:"file_path,omitempty"`
}

// ReplyParameters says which message a new one answers.
type ReplyParameters struct {
	MessageID int64 `json:"message_id"`
	// AllowSendingWithoutReply sends the message even when the one it
	// answers was deleted.
	AllowSendingWithoutReply bool `json:"allow_sending_without_reply,omitempty"`
}

// LinkPreviewOptions controls the preview of the first link.
type LinkPreviewOptions struct {
	IsDisabled bool `json:"is_disabled,omitempty"`
}

// SendMessage is sendMessage's parameters.
type SendMessage struct {
	ChatID             int64               `json:"chat_id"`
	Text               string              `json:"text"`
	ParseMode          string              `json:"parse_mode,omitempty"`
	Entities           []MessageEntity     `json:"entities,omitempty"`
	ReplyParameters    *ReplyParameters    `json:"reply_parameters,omitempty"`
	LinkPreviewOptions *LinkPreviewOptions `json:"link_preview_options,omitempty"`
}

// EditMessageText is editMessageText's parameters.
type EditMessageText struct {
	ChatID    int64           `json:"chat_id"`
	MessageID int64           `json:"message_id"`
	Text      string          `json:"text"`
	ParseMode string          `json:"parse_mode,omitempty"`
	Entities  []MessageEntity `json:"entities,omitempty"`
}

// GetUpdates is getUpdates's parameters.
type GetUpdates struct {
	Offset         int64    `json:"offset,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Timeout        int      `json:"timeout,omitempty"`
	AllowedUpdates []string `json:"allowed_updates,omitempty"`
}

// ResponseParameters tells why a request failed and how to retry it.
type ResponseParameters struct {
	MigrateToChatID int64 `json:"migrate_to_chat_id,omitempty"`
	RetryAfter      int   `json:"retry_after,omitempty"`
}

// Response is the envelope of every answer.
type Response[T any] struct {
	OK          bool                `json:"ok"`
	Result      T                   `json:"result,omitempty"`
	Description string              `json:"description,omitempty"`
	ErrorCode   int                 `json:"error_code,omitempty"`
	Parameters  *ResponseParameters `json:"parameters,omitempty"`
}

// SetWebhook is setWebhook's parameters.
type SetWebhook struct {
	URL string `json:"url"`
	// SecretToken comes back in every request's
	// X-Telegram-Bot-Api-Secret-Token header.
	SecretToken    string   `json:"secret_token,omitempty"`
	AllowedUpdates []string `json:"allowed_updates,omitempty"`
	// MaxConnections 1 delivers one update at a time, in order.
	MaxConnections     int  `json:"max_connections,omitempty"`
	DropPendingUpdates bool `json:"drop_pending_updates,omitempty"`
}

// SecretHeader is the header a webhook request carries the secret in.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"
