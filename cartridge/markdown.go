package cartridge

func parseMarkdown(src []byte, path string) (*Cartridge, error) {
	return nil, &Error{File: path, Msg: "Markdown cartridges are not supported yet"}
}
