package main

import (
	"fmt"
	"io"
	"sort"
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
	case "bash", "zsh":
		subs, flags, err := a.commandTree()
		if err != nil {
			return err
		}
		script = fmt.Sprintf(bashCompletion, bashCase(subs), bashCase(flags), words, commands)
		if args[0] == "zsh" {
			script = "autoload -U +X bashcompinit && bashcompinit\n" + script
		}
	case "fish":
		_, flags, err := a.commandTree()
		if err != nil {
			return err
		}
		script = fmt.Sprintf(fishCompletion, words, commands)
		for _, path := range helpPaths {
			if _, ok := cartridgeHelp[path[0]]; ok || len(path) != 1 {
				continue
			}
			for _, f := range strings.Fields(flags[path[0]]) {
				script += fmt.Sprintf("complete -c nb -n '__fish_seen_subcommand_from %s' -l %s\n", path[0], strings.TrimPrefix(f, "--"))
			}
		}
	default:
		return &usageError{fmt.Sprintf("no completion for %q: nb completion bash, zsh or fish", args[0])}
	}
	_, err := io.WriteString(a.Stdout, script)
	return err
}

// commandTree is what completion knows of nb's commands, from the same
// flag sets as their help: the subcommands of each command path
// ("gateway cron" -> "list add ...") and the flags of each.
func (a *App) commandTree() (subs, flags map[string]string, err error) {
	subs, flags = map[string]string{}, map[string]string{}
	for _, path := range helpPaths {
		if _, ok := cartridgeHelp[path[0]]; ok {
			continue
		}
		key := strings.Join(path, " ")
		if len(path) > 1 {
			parent := strings.Join(path[:len(path)-1], " ")
			subs[parent] = strings.TrimSpace(subs[parent] + " " + path[len(path)-1])
		}
		fs, err := a.helpSet(path)
		if err != nil {
			return nil, nil, err
		}
		flags[key] = strings.Join(append(fs.Flags(), "--help"), " ")
	}
	return subs, flags, nil
}

// bashCase writes m as the arms of a bash case on a command path.
func bashCase(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q) echo %q ;;\n", k, m[k])
	}
	return b.String()
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
_nb_subcommands() {
	case "$1" in
%s	esac
}
_nb_flags() {
	case "$1" in
%s	esac
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
	if ((COMP_CWORD > i)) && [[ " $subcommands " == *" ${COMP_WORDS[i]} "* ]]; then
		# nb's own command: its subcommands, then its flags.
		local path=${COMP_WORDS[i]} j=$((i + 1))
		while ((j < COMP_CWORD)) && [[ " $(_nb_subcommands "$path") " == *" ${COMP_WORDS[j]} "* ]]; do
			path="$path ${COMP_WORDS[j]}"
			((j++))
		done
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$(_nb_flags "$path")" -- "$cur"))
		elif ((COMP_CWORD == j)) && [[ -n $(_nb_subcommands "$path") ]]; then
			COMPREPLY=($(compgen -W "$(_nb_subcommands "$path")" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return
	fi
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
