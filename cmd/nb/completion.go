package main

import (
	"fmt"
	"io"
	"strings"
)

// completion prints a shell's completion script: nb's subcommands, the
// commands after a cartridge and a state key, the approval flags, and
// cartridges (files ending in .yml, .yaml or .md, here and in the
// folders of NANO_BOTS_CARTRIDGES_PATH) where a cartridge goes.
func (a *App) completion(args []string) error {
	fs := a.flags("nb completion", "nb completion bash|zsh|fish", `Prints the shell's completion script: nb's commands and their flags, the
commands after a cartridge and a state key, and cartridges (files ending in
.yml, .yaml or .md, here and in the folders of NANO_BOTS_CARTRIDGES_PATH).
  bash: eval "$(nb completion bash)"   (in ~/.bashrc)
  zsh:  eval "$(nb completion zsh)"    (in ~/.zshrc)
  fish: nb completion fish | source    (in ~/.config/fish/config.fish)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) != 1 {
		return &usageError{"give the shell: nb completion bash, zsh or fish"}
	}
	words := strings.Join(subcommands, " ")
	commands := strings.Join(cartridgeCommands, " ")
	var script string
	switch args[0] {
	case "bash":
		script = fmt.Sprintf(bashCompletion, words, commands)
	case "zsh":
		script = "autoload -U +X bashcompinit && bashcompinit\n" + fmt.Sprintf(bashCompletion, words, commands)
	case "fish":
		script = fmt.Sprintf(fishCompletion, words, commands)
	default:
		return &usageError{fmt.Sprintf("no completion for %q: nb completion bash, zsh or fish", args[0])}
	}
	_, err := io.WriteString(a.Stdout, script)
	return err
}

const bashCompletion = `# nb's completion for bash: eval "$(nb completion bash)"
_nb_cartridges() {
	local IFS=:
	local dirs=". ${NANO_BOTS_CARTRIDGES_PATH}"
	local d
	for d in ${NANO_BOTS_CARTRIDGES_PATH}; do
		compgen -f -X '!*.@(yml|yaml|md)' -- "$d/$1" 2>/dev/null | sed "s|^$d/||"
	done
}
_nb() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local subcommands="%s"
	local commands="%s"
	local i=1
	while [[ ${COMP_WORDS[i]} == --yes || ${COMP_WORDS[i]} == -y || ${COMP_WORDS[i]} == --allow-tool* ]]; do
		[[ ${COMP_WORDS[i]} == --allow-tool ]] && ((i++))
		((i++))
	done
	case $((COMP_CWORD - i)) in
	0)
		shopt -s extglob
		COMPREPLY=($(compgen -W "$subcommands --yes --allow-tool" -- "$cur") $(compgen -f -X '!*.@(yml|yaml|md)' -- "$cur") $(_nb_cartridges "$cur") $(compgen -d -- "$cur"))
		;;
	1)
		[[ " $subcommands " == *" ${COMP_WORDS[i]} "* ]] || COMPREPLY=($(compgen -W "-" -- "$cur"))
		;;
	2)
		[[ " $subcommands " == *" ${COMP_WORDS[i]} "* ]] || COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		;;
	esac
}
complete -o filenames -F _nb nb
`

const fishCompletion = `# nb's completion for fish: nb completion fish | source
complete -c nb -f
complete -c nb -n '__fish_is_first_arg' -a '%s' -d 'nb command'
complete -c nb -n '__fish_is_first_arg' -a '(__fish_complete_suffix .yml .yaml .md)' -d cartridge
complete -c nb -n '__fish_is_nth_token 2' -a '-' -d 'no state key'
complete -c nb -n '__fish_is_nth_token 3' -a '%s'
complete -c nb -l yes -s y -d 'approve every tool call of this run'
complete -c nb -l allow-tool -r -d 'approve every call of this tool'
`
