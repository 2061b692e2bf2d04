/* test_anthropic.c: OpenAI chat <-> Anthropic Messages translation (fcgi/anthropic.h, SPEC §18 R-ANT-1, R-ANT-3).
 *
 * JSON in these tables is written with ' for " (q() swaps them back; \\' is an
 * escaped quote inside a string) and compared semantically with json_object_equal;
 * every output is also checked to be compact (what fcgi/usage.c expects). */
#include "check.h"
#include "check_json.h"

#include "anthropic.h"
#include "buf.h"
#include "usage.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* ---- R-ANT-3: request direction ------------------------------------------ */

#define MSG_HI "'messages':[{'role':'user','content':'Hi'}]"
#define OUT_HI "'messages':[{'role':'user','content':[{'type':'text','text':'Hi'}]}]"
#define HEAD "'model':'claude-x','max_tokens':4096,"
#define TOOL_W "{'type':'function','function':{'name':'get_weather','description':'Weather now'," \
               "'parameters':{'type':'object','properties':{'city':{'type':'string'}},'required':['city']}}}"
#define TOOL_W_OUT "{'name':'get_weather','description':'Weather now','input_schema':{'type':'object'," \
                   "'properties':{'city':{'type':'string'}},'required':['city']}}"

static const struct req_case {
    const char *name;
    const char *chat;           /* q-notation */
    int stream;
    const char *want;           /* q-notation Messages body, or NULL when refused */
    enum error_code code;
    const char *param;          /* NULL: param must be NULL */
} req_cases[] = {
    /* shape */
    {"minimal", "{'model':'gpt-4o'," MSG_HI "}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"model replaced, default max_tokens", "{'model':'anything'," MSG_HI "}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"escaping kept", "{'messages':[{'role':'user','content':'a \\'q\\' \\\\ \\n tab\\t \xc3\xa9 \\u2028 </x>'}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'a \\'q\\' \\\\ \\n tab\\t \xc3\xa9 "
     "\\u2028 </x>'}]}]}", 0, NULL},
    /* system and developer -> top-level system, an array of text blocks in order */
    {"system string", "{'messages':[{'role':'system','content':'Be terse.'},{'role':'user','content':'Hi'}]}", 0,
     "{" HEAD "'system':[{'type':'text','text':'Be terse.'}]," OUT_HI "}", 0, NULL},
    {"several leading system messages",
     "{'messages':[{'role':'system','content':'A'},{'role':'developer','content':'B'},"
     "{'role':'system','content':[{'type':'text','text':'C'},{'type':'text','text':'D'}]},{'role':'user','content':'Hi'}]}",
     0, "{" HEAD "'system':[{'type':'text','text':'A'},{'type':'text','text':'B'},{'type':'text','text':'C'},"
     "{'type':'text','text':'D'}]," OUT_HI "}", 0, NULL},
    /* a system message inside the conversation is refused, never moved to the top */
    {"system after the first user message refused",
     "{'messages':[{'role':'system','content':'A'},{'role':'user','content':'Hi'},{'role':'assistant','content':'Yo'},"
     "{'role':'system','content':'C'}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[3].role"},
    {"developer after an assistant message refused",
     "{'messages':[{'role':'assistant','content':'Yo'},{'role':'developer','content':'C'},{'role':'user','content':'Hi'}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].role"},
    {"system after a tool message refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','tool_calls':[{'id':'c','type':'function',"
     "'function':{'name':'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':'c','content':'r'},"
     "{'role':'system','content':'late'}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[3].role"},
    {"empty system text skipped", "{'messages':[{'role':'system','content':''}," "{'role':'user','content':'Hi'}]}",
     0, "{" HEAD OUT_HI "}", 0, NULL},
    {"system cache_control kept",
     "{'messages':[{'role':'system','content':[{'type':'text','text':'S','cache_control':{'type':'ephemeral'}}]},"
     "{'role':'user','content':'Hi'}]}", 0,
     "{" HEAD "'system':[{'type':'text','text':'S','cache_control':{'type':'ephemeral'}}]," OUT_HI "}", 0, NULL},
    {"system image part refused",
     "{'messages':[{'role':'system','content':[{'type':'image_url','image_url':{'url':'https://x/i.png'}}]},"
     "{'role':'user','content':'Hi'}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"only system messages", "{'messages':[{'role':'system','content':'S'}]}", 0, NULL, ERR_MISSING_FIELD,
     "messages"},
    /* user parts */
    {"user text parts",
     "{'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':'b'}]}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':'b'}]}]}", 0,
     NULL},
    {"image base64",
     "{'messages':[{'role':'user','content':[{'type':'text','text':'What?'},{'type':'image_url','image_url':"
     "{'url':'data:image/png;base64,iVBORw0KGgo=','detail':'auto'}}]}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'What?'},{'type':'image','source':"
     "{'type':'base64','media_type':'image/png','data':'iVBORw0KGgo='}}]}]}", 0, NULL},
    {"image https url",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'https://example.com/a.jpg'}}]}]}",
     0, "{" HEAD "'messages':[{'role':'user','content':[{'type':'image','source':{'type':'url','url':"
        "'https://example.com/a.jpg'}}]}]}", 0, NULL},
    {"image detail null passes",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'https://e.com/a.jpg',"
     "'detail':null}}]}]}", 0, "{" HEAD "'messages':[{'role':'user','content':[{'type':'image','source':"
     "{'type':'url','url':'https://e.com/a.jpg'}}]}]}", 0, NULL},
    {"image detail high refused",
     "{'messages':[{'role':'user','content':[{'type':'text','text':'What?'},{'type':'image_url','image_url':"
     "{'url':'https://e.com/a.jpg','detail':'high'}}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "messages[0].content[1].image_url.detail"},
    {"image detail low refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':'b'},{'role':'user','content':["
     "{'type':'image_url','image_url':{'url':'data:image/png;base64,iVBORw0KGgo=','detail':'low'}}]}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[2].content[0].image_url.detail"},
    {"image_url unknown key refused",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'https://e.com/a.jpg',"
     "'format':'png'}}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].image_url.format"},
    {"image cache_control kept",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'https://e.com/a.jpg'},"
     "'cache_control':{'type':'ephemeral'}}]}]}", 0, "{" HEAD "'messages':[{'role':'user','content':[{'type':'image',"
     "'source':{'type':'url','url':'https://e.com/a.jpg'},'cache_control':{'type':'ephemeral'}}]}]}", 0, NULL},
    {"text part unknown key refused",
     "{'messages':[{'role':'user','content':[{'type':'text','text':'a','annotations':[]}]}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].annotations"},
    {"text part cache_control not an object",
     "{'messages':[{'role':'user','content':[{'type':'text','text':'a','cache_control':'ephemeral'}]}]}", 0, NULL,
     ERR_INVALID_TYPE, "messages[0].content[0].cache_control"},
    {"system part unknown key refused",
     "{'messages':[{'role':'system','content':[{'type':'text','text':'S','lang':'en'}]},{'role':'user','content':'Hi'}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].content[0].lang"},
    /* message keys: name and the assistant's extra fields pass only as null */
    {"user name refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':'b'},{'role':'user','name':'bob',"
     "'content':'c'}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[2].name"},
    {"system name refused", "{'messages':[{'role':'system','name':'ops','content':'S'},{'role':'user','content':'Hi'}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].name"},
    {"assistant name refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','name':'bot','content':'b'}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[1].name"},
    {"tool name refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','tool_calls':[{'id':'c','type':'function',"
     "'function':{'name':'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':'c','name':'f','content':'r'}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages[2].name"},
    {"assistant refusal refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':null,'refusal':'I cannot.'}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].refusal"},
    {"assistant audio refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':'b','audio':{'id':'audio_1'}}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].audio"},
    {"assistant function_call refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':null,'function_call':{'name':'f',"
     "'arguments':'{}'}}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].function_call"},
    {"assistant annotations refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','content':'b','annotations':[{'type':"
     "'url_citation'}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].annotations"},
    {"unknown message key refused even when null", "{'messages':[{'role':'user','content':'Hi','weight':null}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages[0].weight"},
    {"the first refusal in message order wins",
     "{'messages':[{'role':'user','content':'a','name':'x'},{'role':'system','content':'late'}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages[0].name"},
    {"do-nothing message values pass",
     "{'messages':[{'role':'system','content':'S','name':null},{'role':'user','content':'a','name':null},"
     "{'role':'assistant','content':'b','name':null,'refusal':null,'audio':null,'function_call':null,"
     "'annotations':[],'tool_calls':null},{'role':'user','content':'c'}]}", 0,
     "{" HEAD "'system':[{'type':'text','text':'S'}],'messages':[{'role':'user','content':[{'type':'text','text':'a'}]},"
     "{'role':'assistant','content':[{'type':'text','text':'b'}]},{'role':'user','content':[{'type':'text','text':"
     "'c'}]}]}", 0, NULL},
    {"image http refused",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'http://example.com/a.jpg'}}]}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"image data url not base64 refused",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'data:image/png,abc'}}]}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"data url not an image refused",
     "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'data:text/plain;base64,YQ=='}}]}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"image_url not an object", "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':7}]}]}", 0,
     NULL, ERR_INVALID_TYPE, "messages"},
    {"input_audio part refused",
     "{'messages':[{'role':'user','content':[{'type':'input_audio','input_audio':{'data':'x','format':'wav'}}]}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"consecutive users merged",
     "{'messages':[{'role':'user','content':'a'},{'role':'user','content':'b'},{'role':'assistant','content':'c'},"
     "{'role':'assistant','content':'d'}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':'b'}]},"
     "{'role':'assistant','content':[{'type':'text','text':'c'},{'type':'text','text':'d'}]}]}", 0, NULL},
    /* tool calls and results */
    {"tool_calls after text, results merged with the next user turn",
     "{'messages':[{'role':'user','content':'Weather?'},{'role':'assistant','content':'Checking.','tool_calls':["
     "{'id':'call_1','type':'function','function':{'name':'get_weather','arguments':'{\\'city\\': \\'Paris\\'}'}},"
     "{'id':'call_2','type':'function','function':{'name':'get_time','arguments':'{}'}}]},"
     "{'role':'tool','tool_call_id':'call_1','content':'18C'},{'role':'tool','tool_call_id':'call_2','content':"
     "[{'type':'text','text':'noon'}]},{'role':'user','content':'Thanks'}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'Weather?'}]},{'role':'assistant','content':"
     "[{'type':'text','text':'Checking.'},{'type':'tool_use','id':'call_1','name':'get_weather','input':{'city':"
     "'Paris'}},{'type':'tool_use','id':'call_2','name':'get_time','input':{}}]},{'role':'user','content':["
     "{'type':'tool_result','tool_use_id':'call_1','content':'18C'},{'type':'tool_result','tool_use_id':'call_2',"
     "'content':[{'type':'text','text':'noon'}]},{'type':'text','text':'Thanks'}]}]}", 0, NULL},
    {"tool_calls with null content and empty arguments",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','content':null,'tool_calls':[{'id':'c1',"
     "'type':'function','function':{'name':'ping','arguments':''}}]},{'role':'assistant','content':'',"
     "'tool_calls':[{'id':'c2','type':'function','function':{'name':'ping','arguments':' '}}]}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'Go'}]},{'role':'assistant','content':["
     "{'type':'tool_use','id':'c1','name':'ping','input':{}},{'type':'tool_use','id':'c2','name':'ping','input':{}}"
     "]}]}", 0, NULL},
    {"invalid JSON arguments",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'id':'c1','type':'function',"
     "'function':{'name':'f','arguments':'{city: Paris'}}]}]}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"arguments not an object",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'id':'c1','type':'function',"
     "'function':{'name':'f','arguments':'[1]'}}]}]}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"arguments with trailing bytes",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'id':'c1','type':'function',"
     "'function':{'name':'f','arguments':'{}x'}}]}]}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"tool_calls unknown key refused",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'id':'c1','type':'function',"
     "'function':{'name':'f','arguments':'{}'}},{'index':1,'id':'c2','type':'function','function':{'name':'f',"
     "'arguments':'{}'}}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[1].tool_calls[1].index"},
    {"tool_calls function unknown key refused",
     "{'messages':[{'role':'user','content':'Go'},{'role':'assistant','tool_calls':[{'id':'c1','type':'function',"
     "'function':{'name':'f','arguments':'{}','parsed_arguments':{}}}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "messages[1].tool_calls[0].function.parsed_arguments"},
    {"tool result parts keep cache_control",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','tool_calls':[{'id':'c','type':'function',"
     "'function':{'name':'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':'c','content':[{'type':'text',"
     "'text':'r','cache_control':{'type':'ephemeral'}}]}]}", 0,
     "{" HEAD "'messages':[{'role':'user','content':[{'type':'text','text':'a'}]},{'role':'assistant','content':["
     "{'type':'tool_use','id':'c','name':'f','input':{}}]},{'role':'user','content':[{'type':'tool_result',"
     "'tool_use_id':'c','content':[{'type':'text','text':'r','cache_control':{'type':'ephemeral'}}]}]}]}", 0, NULL},
    {"tool result part unknown key refused",
     "{'messages':[{'role':'user','content':'a'},{'role':'assistant','tool_calls':[{'id':'c','type':'function',"
     "'function':{'name':'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':'c','content':[{'type':'text',"
     "'text':'r','id':'x'}]}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "messages[2].content[0].id"},
    {"tool message without tool_call_id", "{'messages':[{'role':'user','content':'a'},{'role':'tool','content':'r'}]}",
     0, NULL, ERR_MISSING_FIELD, "messages"},
    {"assistant without content or tool_calls", "{'messages':[{'role':'user','content':'a'},{'role':'assistant'}]}",
     0, NULL, ERR_MISSING_FIELD, "messages"},
    /* tools and tool_choice */
    {"tools, default input_schema",
     "{" MSG_HI ",'tools':[" TOOL_W ",{'type':'function','function':{'name':'noargs','strict':false}}]}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT ",{'name':'noargs','input_schema':{'type':'object','properties':{}}}]}",
     0, NULL},
    {"tool strict null passes", "{" MSG_HI ",'tools':[{'type':'function','function':{'name':'noargs','strict':null}}]}",
     0, "{" HEAD OUT_HI ",'tools':[{'name':'noargs','input_schema':{'type':'object','properties':{}}}]}", 0, NULL},
    {"tool strict true refused",
     "{" MSG_HI ",'tools':[{'type':'function','function':{'name':'noargs','strict':true}}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tools[0].function.strict"},
    {"second tool strict true refused", "{" MSG_HI ",'tools':[" TOOL_W ",{'type':'function','function':{'name':'g',"
                                        "'parameters':{'type':'object'},'strict':true}}]}",
     0, NULL, ERR_UNSUPPORTED_PARAMETER, "tools[1].function.strict"},
    {"tool unknown key refused", "{" MSG_HI ",'tools':[{'type':'function','function':{'name':'f'},'extra':null}]}", 0,
     NULL, ERR_UNSUPPORTED_PARAMETER, "tools[0].extra"},
    {"tool function unknown key refused",
     "{" MSG_HI ",'tools':[{'type':'function','function':{'name':'f','examples':[]}}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tools[0].function.examples"},
    {"tool cache_control kept",
     "{" MSG_HI ",'tools':[{'type':'function','function':{'name':'f'},'cache_control':{'type':'ephemeral'}}]}", 0,
     "{" HEAD OUT_HI ",'tools':[{'name':'f','input_schema':{'type':'object','properties':{}},'cache_control':"
     "{'type':'ephemeral'}}]}", 0, NULL},
    {"tool_choice auto", "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'auto'}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'auto'}}", 0, NULL},
    {"tool_choice none", "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'none'}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'none'}}", 0, NULL},
    {"tool_choice required -> any", "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'required'}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'any'}}", 0, NULL},
    {"tool_choice function -> tool",
     "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':{'type':'function','function':{'name':'get_weather'}}}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'tool','name':'get_weather'}}", 0, NULL},
    {"parallel_tool_calls false, no tool_choice", "{" MSG_HI ",'tools':[" TOOL_W "],'parallel_tool_calls':false}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'auto','disable_parallel_tool_use':true}}", 0,
     NULL},
    {"parallel_tool_calls false with required",
     "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'required','parallel_tool_calls':false}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'any','disable_parallel_tool_use':true}}", 0,
     NULL},
    {"parallel_tool_calls false with none",
     "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'none','parallel_tool_calls':false}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "],'tool_choice':{'type':'none'}}", 0, NULL},
    {"parallel_tool_calls true changes nothing", "{" MSG_HI ",'tools':[" TOOL_W "],'parallel_tool_calls':true}", 0,
     "{" HEAD OUT_HI ",'tools':[" TOOL_W_OUT "]}", 0, NULL},
    {"tool_choice auto without tools not sent", "{" MSG_HI ",'tool_choice':'auto','tools':[]}", 0, "{" HEAD OUT_HI "}",
     0, NULL},
    {"tool_choice required without tools", "{" MSG_HI ",'tool_choice':'required'}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tool_choice"},
    {"tool_choice unknown string", "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':'sometimes'}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "tool_choice"},
    {"tool_choice wrong type", "{" MSG_HI ",'tools':[" TOOL_W "],'tool_choice':3}", 0, NULL, ERR_INVALID_TYPE,
     "tool_choice"},
    {"non-function tool refused", "{" MSG_HI ",'tools':[{'type':'web_search'}]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "tools"},
    {"tool without a name", "{" MSG_HI ",'tools':[{'type':'function','function':{}}]}", 0, NULL, ERR_INVALID_TYPE,
     "tools"},
    /* stop, user, max_tokens */
    {"stop string", "{" MSG_HI ",'stop':'END'}", 0, "{" HEAD OUT_HI ",'stop_sequences':['END']}", 0, NULL},
    {"stop list", "{" MSG_HI ",'stop':['a','b']}", 0, "{" HEAD OUT_HI ",'stop_sequences':['a','b']}", 0, NULL},
    {"stop empty list not sent", "{" MSG_HI ",'stop':[]}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"stop wrong type", "{" MSG_HI ",'stop':[1]}", 0, NULL, ERR_INVALID_TYPE, "stop"},
    {"user -> metadata.user_id", "{" MSG_HI ",'user':'u-42'}", 0, "{" HEAD OUT_HI ",'metadata':{'user_id':'u-42'}}",
     0, NULL},
    {"safety_identifier -> metadata.user_id", "{" MSG_HI ",'safety_identifier':'s-1'}", 0,
     "{" HEAD OUT_HI ",'metadata':{'user_id':'s-1'}}", 0, NULL},
    {"user wins over safety_identifier", "{" MSG_HI ",'safety_identifier':'s-1','user':'u-1'}", 0,
     "{" HEAD OUT_HI ",'metadata':{'user_id':'u-1'}}", 0, NULL},
    {"user wrong type", "{" MSG_HI ",'user':5}", 0, NULL, ERR_INVALID_TYPE, "user"},
    {"max_tokens", "{" MSG_HI ",'max_tokens':64}", 0, "{'model':'claude-x','max_tokens':64," OUT_HI "}", 0, NULL},
    {"max_completion_tokens", "{" MSG_HI ",'max_completion_tokens':128}", 0,
     "{'model':'claude-x','max_tokens':128," OUT_HI "}", 0, NULL},
    {"max_completion_tokens wins", "{" MSG_HI ",'max_tokens':64,'max_completion_tokens':128}", 0,
     "{'model':'claude-x','max_tokens':128," OUT_HI "}", 0, NULL},
    {"max_tokens null means default", "{" MSG_HI ",'max_tokens':null}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"max_tokens wrong type", "{" MSG_HI ",'max_tokens':'64'}", 0, NULL, ERR_INVALID_TYPE, "max_tokens"},
    /* R-ANT-3: temperature within 0..1, never clamped or scaled */
    {"temperature 1.5 refused", "{" MSG_HI ",'temperature':1.5}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "temperature"},
    {"temperature -0.1 refused", "{" MSG_HI ",'temperature':-0.1}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "temperature"},
    {"temperature 2 refused", "{" MSG_HI ",'temperature':2}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "temperature"},
    {"temperature 0", "{" MSG_HI ",'temperature':0}", 0, "{" HEAD OUT_HI ",'temperature':0}", 0, NULL},
    {"temperature 1", "{" MSG_HI ",'temperature':1}", 0, "{" HEAD OUT_HI ",'temperature':1}", 0, NULL},
    {"temperature 1.0", "{" MSG_HI ",'temperature':1.0}", 0, "{" HEAD OUT_HI ",'temperature':1.0}", 0, NULL},
    {"temperature 0.2, top_p, top_k", "{" MSG_HI ",'temperature':0.2,'top_p':0.9,'top_k':40}", 0,
     "{" HEAD OUT_HI ",'temperature':0.2,'top_p':0.9,'top_k':40}", 0, NULL},
    {"temperature wrong type", "{" MSG_HI ",'temperature':'hot'}", 0, NULL, ERR_INVALID_TYPE, "temperature"},
    /* stream */
    {"stream with stream_options", "{" MSG_HI ",'stream':true,'stream_options':{'include_usage':true}}", 1,
     "{" HEAD OUT_HI ",'stream':true}", 0, NULL},
    {"not streaming: no stream field", "{" MSG_HI ",'stream':false}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"stream wrong type", "{" MSG_HI ",'stream':'yes'}", 0, NULL, ERR_INVALID_TYPE, "stream"},
    /* R-ANT-3: refused parameters, one row each */
    {"n 2", "{" MSG_HI ",'n':2}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "n"},
    {"logprobs true", "{" MSG_HI ",'logprobs':true}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "logprobs"},
    {"top_logprobs 3", "{" MSG_HI ",'top_logprobs':3}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "top_logprobs"},
    {"response_format json_object", "{" MSG_HI ",'response_format':{'type':'json_object'}}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "response_format"},
    {"response_format json_schema",
     "{" MSG_HI ",'response_format':{'type':'json_schema','json_schema':{'name':'x','schema':{}}}}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "response_format"},
    {"frequency_penalty 0.5", "{" MSG_HI ",'frequency_penalty':0.5}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "frequency_penalty"},
    {"presence_penalty -1", "{" MSG_HI ",'presence_penalty':-1}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "presence_penalty"},
    {"seed 42", "{" MSG_HI ",'seed':42}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "seed"},
    {"seed 0", "{" MSG_HI ",'seed':0}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "seed"},
    {"logit_bias", "{" MSG_HI ",'logit_bias':{'50256':-100}}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "logit_bias"},
    {"store true", "{" MSG_HI ",'store':true}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "store"},
    {"service_tier flex", "{" MSG_HI ",'service_tier':'flex'}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "service_tier"},
    {"unknown field functions", "{" MSG_HI ",'functions':[]}", 0, NULL, ERR_UNSUPPORTED_PARAMETER, "functions"},
    {"unknown field reasoning_effort", "{" MSG_HI ",'reasoning_effort':'low'}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "reasoning_effort"},
    {"unknown field even when null", "{" MSG_HI ",'modalities':null}", 0, NULL, ERR_UNSUPPORTED_PARAMETER,
     "modalities"},
    /* nulls and do-nothing values pass; the allow-list is consumed */
    {"do-nothing values pass",
     "{" MSG_HI ",'n':1,'logprobs':false,'top_logprobs':0,'frequency_penalty':0,'presence_penalty':0.0,"
     "'logit_bias':{},'response_format':{'type':'text'},'seed':null,'store':false,'service_tier':'auto',"
     "'metadata':{'k':'v'},'prompt_cache_key':'tenant-42','temperature':null,'stop':null,'user':null,"
     "'tools':null,'tool_choice':null,'stream_options':null}", 0, "{" HEAD OUT_HI "}", 0, NULL},
    {"all nulls pass", "{" MSG_HI ",'n':null,'logprobs':null,'top_logprobs':null,'response_format':null,"
                       "'frequency_penalty':null,'presence_penalty':null,'logit_bias':null,'service_tier':'default'}",
     0, "{" HEAD OUT_HI "}", 0, NULL},
    /* messages shape */
    {"messages empty", "{'messages':[]}", 0, NULL, ERR_MISSING_FIELD, "messages"},
    {"messages missing", "{'model':'m'}", 0, NULL, ERR_MISSING_FIELD, "messages"},
    {"messages null", "{'messages':null}", 0, NULL, ERR_MISSING_FIELD, "messages"},
    {"messages not an array", "{'messages':'Hi'}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"message not an object", "{'messages':['Hi']}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"role missing", "{'messages':[{'content':'Hi'}]}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"role function refused", "{'messages':[{'role':'function','name':'f','content':'x'}]}", 0, NULL,
     ERR_UNSUPPORTED_PARAMETER, "messages"},
    {"user content wrong type", "{'messages':[{'role':'user','content':5}]}", 0, NULL, ERR_INVALID_TYPE, "messages"},
    {"body not an object", "[1]", 0, NULL, ERR_INVALID_TYPE, NULL},
};

static void test_requests(void)
{
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const struct req_case *c = &req_cases[i];
        char *chat_s = q(c->chat);
        struct json_object *chat = parse_n(chat_s, strlen(chat_s));
        CHECK(chat != NULL, "%s: the test's chat body does not parse: %s", c->name, chat_s);
        struct buf out;
        buf_init(&out, 0);
        buf_puts(&out, "PRE");
        struct xlate_fail f;
        memset(&f, 0x5a, sizeof f);
        int rc = anthropic_request(chat, "claude-x", 4096, c->stream, &out, &f);
        if (c->want) {
            CHECK(rc == 0, "%s: refused: %s (param %s)", c->name, f.message, f.param ? f.param : "null");
            if (rc == 0) {
                CHECK(memcmp(out.data, "PRE", 3) == 0, "%s: the output must be appended", c->name);
                check_json(c->name, out.data + 3, out.len - 3, c->want);
            }
        } else {
            CHECK(rc == -1, "%s: accepted: %s", c->name, out.data);
            CHECK(f.code == c->code, "%s: code %d, want %d (%s)", c->name, (int)f.code, (int)c->code, f.message);
            if (c->param)
                CHECK_STR(f.param, c->param, c->name);
            else
                CHECK(f.param == NULL, "%s: param %s, want null", c->name, f.param);
            CHECK(f.message[0] != '\0', "%s: no message", c->name);
            CHECK(out.len == 3 && strcmp(out.data, "PRE") == 0, "%s: output left behind: %s", c->name, out.data);
        }
        buf_free(&out);
        json_object_put(chat);
        free(chat_s);
    }
}

/* default_max_tokens, the model argument and a capped output buffer */
static void test_request_arguments(void)
{
    struct json_object *chat = json_tokener_parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}");
    struct xlate_fail f;
    struct buf out;
    buf_init(&out, 0);
    CHECK_INT(anthropic_request(chat, "claude-sonnet", 1000, 0, &out, &f), 0, "default_max_tokens");
    check_json("default_max_tokens 1000", out.data, out.len, "{'model':'claude-sonnet','max_tokens':1000," OUT_HI "}");
    buf_free(&out);
    buf_init(&out, 40);
    CHECK_INT(anthropic_request(chat, "claude-sonnet", 1000, 0, &out, &f), -1, "capped output");
    CHECK(f.code == ERR_REQUEST_TOO_LARGE, "capped output: code %d", (int)f.code);
    CHECK_INT(out.len, 0, "capped output leaves nothing");
    buf_free(&out);
    json_object_put(chat);
}

/* A capped output buffer (struct buf max): every cap short of the whole body is
 * request_too_large with the buffer as it was, wherever the overflow falls
 * (a literal, an escaped string, max_tokens, a copied value); the exact cap fits. */
static const char *const capped_chats[] = {
    "{'messages':[{'role':'system','content':'Be terse \\\\ \\'ok\\''},{'role':'user','content':[{'type':'text',"
    "'text':'Hi \\n \xc3\xa9','cache_control':{'type':'ephemeral'}}]},{'role':'assistant','content':'x','tool_calls':["
    "{'id':'c1','type':'function','function':{'name':'f','arguments':'{\\'a\\':[1,2]}'}}]},{'role':'tool',"
    "'tool_call_id':'c1','content':'r'}],'max_tokens':123456,'temperature':0.5,'stop':['END'],'user':'u',"
    "'tools':[" TOOL_W "],'tool_choice':'required','parallel_tool_calls':false}",
    "{'messages':[{'role':'user','content':'\\u00e9\\u2028 \\\\ \\u0001'}]}",
};

static void test_request_capped(void)
{
    for (size_t i = 0; i < sizeof capped_chats / sizeof capped_chats[0]; i++) {
        char *chat_s = q(capped_chats[i]);
        struct json_object *chat = parse_n(chat_s, strlen(chat_s));
        CHECK(chat != NULL, "capped chat %zu does not parse", i);
        struct xlate_fail f;
        struct buf full;
        buf_init(&full, 0);
        buf_puts(&full, "PRE");
        CHECK_INT(anthropic_request(chat, "claude-x", 4096, 1, &full, &f), 0, "capped chat translates uncapped");
        for (size_t cap = 3; cap <= full.len; cap++) {
            struct buf out;
            buf_init(&out, cap);
            buf_puts(&out, "PRE");
            memset(&f, 0x5a, sizeof f);
            int rc = anthropic_request(chat, "claude-x", 4096, 1, &out, &f);
            if (cap == full.len) {
                CHECK(rc == 0 && out.len == full.len && memcmp(out.data, full.data, full.len) == 0,
                      "chat %zu: the exact cap %zu changed the body", i, cap);
            } else {
                CHECK(rc == -1 && f.code == ERR_REQUEST_TOO_LARGE && f.param == NULL && f.message[0],
                      "chat %zu cap %zu: rc %d code %d", i, cap, rc, (int)f.code);
                CHECK(out.len == 3 && memcmp(out.data, "PRE", 4) == 0, "chat %zu cap %zu: output left behind", i,
                      cap);
            }
            buf_free(&out);
        }
        buf_free(&full);
        json_object_put(chat);
        free(chat_s);
    }
}

/* ---- R-ANT-1: finish reasons ---------------------------------------------- */

static const struct {
    const char *stop_reason, *finish;
} finish_cases[] = {
    {"end_turn", "stop"},
    {"stop_sequence", "stop"},
    {"max_tokens", "length"},
    {"tool_use", "tool_calls"},
    {"refusal", "content_filter"},
    {"model_context_window_exceeded", "length"},
    {"pause_turn", "stop"},
    {"something_new", "stop"},
    {"", "stop"},
    {NULL, "stop"},
};

static void test_finish_reasons(void)
{
    for (size_t i = 0; i < sizeof finish_cases / sizeof finish_cases[0]; i++)
        CHECK_STR(anthropic_finish_reason(finish_cases[i].stop_reason), finish_cases[i].finish,
                  finish_cases[i].stop_reason ? finish_cases[i].stop_reason : "(null)");
}

/* ---- R-ANT-1: non-stream responses ---------------------------------------- */

#define MSG_HEAD "{'id':'msg_1','type':'message','role':'assistant','model':'claude-x',"
#define CC_HEAD "{'id':'msg_1','object':'chat.completion','created':1700000000,'model':'gpt-claude',"

static const struct {
    const char *name;
    const char *body;           /* q-notation */
    int rc;
    const char *want;
    const char *finish;
    int64_t prompt, completion;
    int found;
} resp_cases[] = {
    {"text",
     MSG_HEAD "'content':[{'type':'text','text':'Hello'}],'stop_reason':'end_turn','stop_sequence':null,"
     "'usage':{'input_tokens':12,'output_tokens':6,'cache_creation_input_tokens':3,'cache_read_input_tokens':20}}",
     0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':'Hello'},'finish_reason':'stop',"
     "'logprobs':null}],'usage':{'prompt_tokens':35,'completion_tokens':6,'total_tokens':41,"
     "'prompt_tokens_details':{'cached_tokens':20}}}",
     "stop", 35, 6, 1},
    {"text and tool_use",
     MSG_HEAD "'content':[{'type':'text','text':'Checking.'},{'type':'tool_use','id':'toolu_1','name':'get_weather',"
     "'input':{'city':'Paris','days':[1,2]}},{'type':'tool_use','id':'toolu_2','name':'get_time','input':{}}],"
     "'stop_reason':'tool_use','usage':{'input_tokens':50,'output_tokens':30}}",
     0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':'Checking.','tool_calls':["
     "{'id':'toolu_1','type':'function','function':{'name':'get_weather','arguments':'{\\'city\\':\\'Paris\\',"
     "\\'days\\':[1,2]}'}},{'id':'toolu_2','type':'function','function':{'name':'get_time','arguments':'{}'}}]},"
     "'finish_reason':'tool_calls','logprobs':null}],'usage':{'prompt_tokens':50,'completion_tokens':30,"
     "'total_tokens':80,'prompt_tokens_details':{'cached_tokens':0}}}",
     "tool_calls", 50, 30, 1},
    {"tool_use only: content null",
     MSG_HEAD "'content':[{'type':'tool_use','id':'t','name':'f','input':{'q':'a/b'}}],'stop_reason':'tool_use',"
     "'usage':{'input_tokens':1,'output_tokens':2}}",
     0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':null,'tool_calls':[{'id':'t','type':"
     "'function','function':{'name':'f','arguments':'{\\'q\\':\\'a/b\\'}'}}]},'finish_reason':'tool_calls',"
     "'logprobs':null}],'usage':{'prompt_tokens':1,'completion_tokens':2,'total_tokens':3,'prompt_tokens_details':"
     "{'cached_tokens':0}}}",
     "tool_calls", 1, 2, 1},
    {"text blocks joined, thinking skipped",
     MSG_HEAD "'content':[{'type':'thinking','thinking':'hmm','signature':'x'},{'type':'text','text':'a \\'b\\''},"
     "{'type':'text','text':'\\nc'}],'stop_reason':'max_tokens','usage':{'input_tokens':4,'output_tokens':5}}",
     0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':'a \\'b\\'\\nc'},'finish_reason':'length',"
     "'logprobs':null}],'usage':{'prompt_tokens':4,'completion_tokens':5,'total_tokens':9,'prompt_tokens_details':"
     "{'cached_tokens':0}}}",
     "length", 4, 5, 1},
    {"no content: empty string",
     MSG_HEAD "'content':[],'stop_reason':'refusal','usage':{'input_tokens':7,'output_tokens':0}}", 0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':''},'finish_reason':'content_filter',"
     "'logprobs':null}],'usage':{'prompt_tokens':7,'completion_tokens':0,'total_tokens':7,'prompt_tokens_details':"
     "{'cached_tokens':0}}}",
     "content_filter", 7, 0, 1},
    {"no usage, null stop_reason", MSG_HEAD "'content':[{'type':'text','text':'x'}],'stop_reason':null}", 0,
     CC_HEAD "'choices':[{'index':0,'message':{'role':'assistant','content':'x'},'finish_reason':'stop',"
     "'logprobs':null}]}",
     "stop", 0, 0, 0},
    {"an error body is not a Message", "{'type':'error','error':{'type':'api_error','message':'x'}}", -1, NULL, "", 0,
     0, 0},
    {"not JSON", "<html>", -1, NULL, "", 0, 0, 0},
    {"truncated", MSG_HEAD "'content':[{'type':'text','text':'x'}", -1, NULL, "", 0, 0, 0},
};

static void test_responses(void)
{
    for (size_t i = 0; i < sizeof resp_cases / sizeof resp_cases[0]; i++) {
        char *body = q(resp_cases[i].body);
        struct buf out;
        buf_init(&out, 0);
        struct usage u;
        memset(&u, 0x5a, sizeof u);
        char finish[32] = "junk";
        int rc = anthropic_response(body, strlen(body), "gpt-claude", 1700000000, &out, &u, finish, sizeof finish);
        CHECK(rc == resp_cases[i].rc, "%s: rc %d", resp_cases[i].name, rc);
        if (rc == 0 && resp_cases[i].want)
            check_json(resp_cases[i].name, out.data, out.len, resp_cases[i].want);
        if (rc != 0)
            CHECK_INT(out.len, 0, resp_cases[i].name);
        const char *fin = finish;
        CHECK_STR(fin, resp_cases[i].finish, resp_cases[i].name);
        CHECK_INT(u.found, resp_cases[i].found, resp_cases[i].name);
        CHECK_INT(u.prompt_tokens, resp_cases[i].prompt, resp_cases[i].name);
        CHECK_INT(u.completion_tokens, resp_cases[i].completion, resp_cases[i].name);
        /* the body the relay accounts from reads the same usage (R-USE-1) */
        if (rc == 0) {
            struct usage u2;
            usage_from_body(out.data, out.len, &u2);
            CHECK(u2.found == u.found && u2.prompt_tokens == u.prompt_tokens &&
                      u2.completion_tokens == u.completion_tokens,
                  "%s: usage_from_body disagrees", resp_cases[i].name);
        }
        buf_free(&out);
        free(body);
    }
}

/* A capped output buffer: every cap short of the whole answer is -1 with the
 * buffer as it was, usage zeroed and no finish reason; the exact cap fits. */
static void test_response_capped(void)
{
    char *body = q(resp_cases[1].body);     /* text and tool_use */
    struct buf full;
    struct usage u;
    char finish[32];
    buf_init(&full, 0);
    buf_puts(&full, "PRE");
    CHECK_INT(anthropic_response(body, strlen(body), "gpt-claude", 1700000000, &full, &u, finish, sizeof finish), 0,
              "capped response translates uncapped");
    for (size_t cap = 3; cap <= full.len; cap++) {
        struct buf out;
        buf_init(&out, cap);
        buf_puts(&out, "PRE");
        memset(&u, 0x5a, sizeof u);
        strcpy(finish, "junk");
        int rc = anthropic_response(body, strlen(body), "gpt-claude", 1700000000, &out, &u, finish, sizeof finish);
        if (cap == full.len) {
            CHECK(rc == 0 && out.len == full.len && memcmp(out.data, full.data, full.len) == 0 && u.found &&
                      strcmp(finish, "tool_calls") == 0,
                  "the exact cap %zu changed the answer", cap);
        } else {
            CHECK(rc == -1, "cap %zu: rc %d", cap, rc);
            CHECK(out.len == 3 && memcmp(out.data, "PRE", 4) == 0, "cap %zu: output left behind", cap);
            CHECK(u.found == 0 && u.prompt_tokens == 0 && u.completion_tokens == 0, "cap %zu: usage kept", cap);
            CHECK(finish[0] == '\0', "cap %zu: finish %s kept", cap, finish);
        }
        buf_free(&out);
    }
    buf_free(&full);
    free(body);
}

/* ---- errors ---------------------------------------------------------------- */

static const struct {
    const char *name;
    long status;
    const char *body;           /* q-notation, sent as is */
    int want_status, retry_after;
    const char *want;
} error_cases[] = {
    {"400", 400, "{'type':'error','error':{'type':'invalid_request_error','message':'max_tokens: too big'},"
                 "'request_id':'req_1'}",
     400, 0, "{'error':{'message':'max_tokens: too big','type':'invalid_request_error','param':null,"
             "'code':'invalid_request_error'}}"},
    {"401", 401, "{'type':'error','error':{'type':'authentication_error','message':'invalid x-api-key'}}", 401, 0,
     "{'error':{'message':'invalid x-api-key','type':'authentication_error','param':null,"
     "'code':'authentication_error'}}"},
    {"403", 403, "{'type':'error','error':{'type':'permission_error','message':'no'}}", 403, 0,
     "{'error':{'message':'no','type':'permission_error','param':null,'code':'permission_error'}}"},
    {"404", 404, "{'type':'error','error':{'type':'not_found_error','message':'model: claude-y'}}", 404, 0,
     "{'error':{'message':'model: claude-y','type':'not_found_error','param':null,'code':'not_found_error'}}"},
    {"413", 413, "{'type':'error','error':{'type':'request_too_large','message':'too large'}}", 413, 0,
     "{'error':{'message':'too large','type':'invalid_request_error','param':null,'code':'request_too_large'}}"},
    {"429", 429, "{'type':'error','error':{'type':'rate_limit_error','message':'slow down'}}", 429, 1,
     "{'error':{'message':'slow down','type':'rate_limit_error','param':null,'code':'rate_limit_error'}}"},
    {"500", 500, "{'type':'error','error':{'type':'api_error','message':'Internal server error'}}", 500, 0,
     "{'error':{'message':'Internal server error','type':'server_error','param':null,'code':'api_error'}}"},
    {"529 -> 503", 529, "{'type':'error','error':{'type':'overloaded_error','message':'Overloaded'}}", 503, 1,
     "{'error':{'message':'Overloaded','type':'server_error','param':null,'code':'overloaded_error'}}"},
    {"escaped message", 400, "{'type':'error','error':{'type':'invalid_request_error','message':'a \\'b\\'\\n'}}",
     400, 0, "{'error':{'message':'a \\'b\\'\\n','type':'invalid_request_error','param':null,"
             "'code':'invalid_request_error'}}"},
    {"unknown type", 418, "{'type':'error','error':{'type':'teapot_error','message':'short and stout'}}", 418, 0,
     "{'error':{'message':'short and stout','type':'invalid_request_error','param':null,'code':'teapot_error'}}"},
    {"non-JSON 502", 502, "<html>Bad Gateway</html>", 502, 0,
     "{'error':{'message':'upstream answered 502','type':'server_error','param':null,'code':'api_error'}}"},
    {"non-JSON 529", 529, "overloaded", 503, 1,
     "{'error':{'message':'upstream answered 529','type':'server_error','param':null,'code':'overloaded_error'}}"},
    {"non-JSON 401", 401, "", 401, 0,
     "{'error':{'message':'upstream answered 401','type':'authentication_error','param':null,"
     "'code':'authentication_error'}}"},
    {"JSON without error", 400, "{'detail':'x'}", 400, 0,
     "{'error':{'message':'upstream answered 400','type':'invalid_request_error','param':null,"
     "'code':'invalid_request_error'}}"},
    {"status outside 4xx/5xx", 200, "{'type':'error','error':{'type':'api_error','message':'odd'}}", 502, 0,
     "{'error':{'message':'odd','type':'server_error','param':null,'code':'api_error'}}"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof error_cases / sizeof error_cases[0]; i++) {
        char *body = q(error_cases[i].body);
        struct buf out;
        buf_init(&out, 0);
        int ra = -1;
        int st = anthropic_error(error_cases[i].status, body, strlen(body), &out, &ra);
        CHECK_INT(st, error_cases[i].want_status, error_cases[i].name);
        CHECK_INT(ra, error_cases[i].retry_after, error_cases[i].name);
        check_json(error_cases[i].name, out.data, out.len, error_cases[i].want);
        buf_free(&out);
        free(body);
    }
}

/* ---- R-ANT-1: streams ------------------------------------------------------ */

#define MAX_EV 16

struct ev {
    const char *event;          /* "" = no event: line */
    const char *data;           /* q-notation */
};

struct payload {
    const char *json;           /* q-notation, or [DONE] */
    enum chunk_kind kind;
};

#define CH(delta, fin) "{'id':'msg_1','object':'chat.completion.chunk','created':1700000000,'model':'gpt-claude'," \
                       "'choices':[{'index':0,'delta':" delta ",'finish_reason':" fin "}]}"
#define USAGE_CH(p, c, t, r) "{'id':'msg_1','object':'chat.completion.chunk','created':1700000000,"             \
                             "'model':'gpt-claude','choices':[],'usage':{'prompt_tokens':" #p                  \
                             ",'completion_tokens':" #c ",'total_tokens':" #t ",'prompt_tokens_details':"       \
                             "{'cached_tokens':" #r "}}}"
#define ROLE_CH CH("{'role':'assistant','content':''}", "null")
#define START(in, out, cr, cc) {"message_start", "{'type':'message_start','message':{'id':'msg_1','type':'message',"  \
                               "'role':'assistant','content':[],'model':'claude-x','stop_reason':null,"               \
                               "'usage':{'input_tokens':" #in ",'output_tokens':" #out                                \
                               ",'cache_read_input_tokens':" #cr ",'cache_creation_input_tokens':" #cc "}}}"}
#define TEXT_START(i) {"content_block_start", "{'type':'content_block_start','index':" #i ",'content_block':"     \
                                              "{'type':'text','text':''}}"}
#define TEXT(i, t) {"content_block_delta", "{'type':'content_block_delta','index':" #i ",'delta':"                 \
                                           "{'type':'text_delta','text':'" t "'}}"}
#define STOP_BLOCK(i) {"content_block_stop", "{'type':'content_block_stop','index':" #i "}"}
#define PING {"ping", "{'type':'ping'}"}
#define MDELTA(reason, out) {"message_delta", "{'type':'message_delta','delta':{'stop_reason':" reason             \
                                              ",'stop_sequence':null},'usage':{'output_tokens':" #out "}}"}
#define MSTOP {"message_stop", "{'type':'message_stop'}"}
#define TOOL_START(i, id, name) {"content_block_start", "{'type':'content_block_start','index':" #i                \
                                 ",'content_block':{'type':'tool_use','id':'" id "','name':'" name "','input':{}}}"}
#define JSON_PIECE(i, p) {"content_block_delta", "{'type':'content_block_delta','index':" #i ",'delta':"           \
                                                 "{'type':'input_json_delta','partial_json':'" p "'}}"}
#define TOOL_CH(k, id, name) CH("{'tool_calls':[{'index':" #k ",'id':'" id "','type':'function','function':"        \
                                "{'name':'" name "','arguments':''}}]}", "null")
#define ARGS_CH(k, a) CH("{'tool_calls':[{'index':" #k ",'function':{'arguments':'" a "'}}]}", "null")
#define FIN_CH(f) CH("{}", "'" f "'")

static const struct stream_case {
    const char *name;
    struct ev ev[MAX_EV];
    struct payload out[MAX_EV];
    int64_t prompt, completion;
    int failed, done;
} stream_cases[] = {
    {"text with ping, usage with cache",
     {START(25, 1, 5, 2), TEXT_START(0), PING, TEXT(0, "Hello"), TEXT(0, " world"), STOP_BLOCK(0),
      MDELTA("'end_turn'", 15), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'Hello'}", "null"), CHUNK_CONTENT},
      {CH("{'content':' world'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(32, 15, 47, 5), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     32, 15, 0, 1},
    {"tool use with input_json_delta pieces",
     {START(40, 1, 0, 0), TEXT_START(0), TEXT(0, "Checking."), STOP_BLOCK(0), TOOL_START(1, "toolu_1", "get_weather"),
      JSON_PIECE(1, ""), JSON_PIECE(1, "{\\'city\\':"), JSON_PIECE(1, " \\'Paris\\'}"), STOP_BLOCK(1),
      TOOL_START(2, "toolu_2", "get_time"), JSON_PIECE(2, "{}"), STOP_BLOCK(2), MDELTA("'tool_use'", 60), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'Checking.'}", "null"), CHUNK_CONTENT},
      {TOOL_CH(0, "toolu_1", "get_weather"), CHUNK_CONTENT},
      {ARGS_CH(0, "{\\'city\\':"), CHUNK_CONTENT},
      {ARGS_CH(0, " \\'Paris\\'}"), CHUNK_CONTENT},
      {TOOL_CH(1, "toolu_2", "get_time"), CHUNK_CONTENT},
      {ARGS_CH(1, "{}"), CHUNK_CONTENT},
      {FIN_CH("tool_calls"), CHUNK_CONTENT},
      {USAGE_CH(40, 60, 100, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     40, 60, 0, 1},
    {"error event",
     {START(10, 1, 0, 0), TEXT(0, "Hi"),
      {"error", "{'type':'error','error':{'type':'overloaded_error','message':'Overloaded'}}"}},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'Hi'}", "null"), CHUNK_CONTENT},
      {"{'error':{'message':'Overloaded','type':'server_error','param':null,'code':'overloaded_error'}}", CHUNK_ERROR}},
     10, 1, 1, 0},
    {"error event, rate limit", {{"error", "{'type':'error','error':{'type':'rate_limit_error','message':'slow'}}"}},
     {{"{'error':{'message':'slow','type':'rate_limit_error','param':null,'code':'rate_limit_error'}}", CHUNK_ERROR}},
     0, 0, 1, 0},
    {"[DONE] once",
     {START(1, 1, 0, 0), MDELTA("'max_tokens'", 9), MSTOP, MSTOP, TEXT(0, "late"), MDELTA("'end_turn'", 10)},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {FIN_CH("length"), CHUNK_CONTENT},
      {USAGE_CH(1, 9, 10, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     1, 9, 0, 1},
    {"no event lines: the data type decides",
     {{"", "{'type':'message_start','message':{'id':'msg_1','model':'claude-x','usage':{'input_tokens':3,"
           "'output_tokens':0}}}"},
      {"", "{'type':'ping'}"}, {"", "{'type':'content_block_delta','index':0,'delta':{'type':'text_delta','text':'x'}}"},
      {"", "{'type':'message_delta','delta':{'stop_reason':'stop_sequence'},'usage':{'output_tokens':2}}"},
      {"", "{'type':'message_stop'}"}},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'x'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(3, 2, 5, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     3, 2, 0, 1},
    {"message_delta carries input and cache counts",
     {START(0, 0, 0, 0), TEXT(0, "y"),
      {"message_delta", "{'type':'message_delta','delta':{'stop_reason':'pause_turn'},'usage':{'output_tokens':4,"
                        "'input_tokens':100,'cache_read_input_tokens':50,'cache_creation_input_tokens':7}}"},
      MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'y'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(157, 4, 161, 50), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     157, 4, 0, 1},
    {"unknown events, thinking and empty deltas dropped",
     {START(2, 0, 0, 0), {"content_block_start", "{'type':'content_block_start','index':0,'content_block':"
                                                "{'type':'thinking','thinking':''}}"},
      {"content_block_delta", "{'type':'content_block_delta','index':0,'delta':{'type':'thinking_delta',"
                              "'thinking':'hmm'}}"},
      {"content_block_delta", "{'type':'content_block_delta','index':0,'delta':{'type':'signature_delta',"
                              "'signature':'s'}}"},
      {"future_event", "{'type':'future_event'}"}, TEXT(1, ""), {"ping", ""}, {"content_block_delta", "not json"},
      MDELTA("'refusal'", 3), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {FIN_CH("content_filter"), CHUNK_CONTENT},
      {USAGE_CH(2, 3, 5, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     2, 3, 0, 1},
    {"text escaping",
     {START(1, 0, 0, 0), TEXT(0, "say \\'hi\\'\\n\\\\ \xe2\x82\xac </b>"), MDELTA("null", 1), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'say \\'hi\\'\\n\\\\ \xe2\x82\xac </b>'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(1, 1, 2, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     1, 1, 0, 1},
    /* several message_delta events: recorded, one finish and one usage chunk at message_stop */
    {"two message_delta: the later stop_reason wins, one usage chunk",
     {START(10, 1, 0, 0), TEXT(0, "a"), MDELTA("null", 3), MDELTA("'max_tokens'", 7), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'a'}", "null"), CHUNK_CONTENT},
      {FIN_CH("length"), CHUNK_CONTENT},
      {USAGE_CH(10, 7, 17, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     10, 7, 0, 1},
    {"a later null stop_reason keeps the earlier one",
     {START(4, 1, 0, 0), TOOL_START(0, "toolu_1", "f"), JSON_PIECE(0, "{}"), MDELTA("'tool_use'", 5),
      MDELTA("null", 6), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {TOOL_CH(0, "toolu_1", "f"), CHUNK_CONTENT},
      {ARGS_CH(0, "{}"), CHUNK_CONTENT},
      {FIN_CH("tool_calls"), CHUNK_CONTENT},
      {USAGE_CH(4, 6, 10, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     4, 6, 0, 1},
    {"three message_delta, text between them",
     {START(2, 1, 0, 0), TEXT(0, "a"), MDELTA("'end_turn'", 2), TEXT(0, "b"), MDELTA("'max_tokens'", 4),
      MDELTA("'stop_sequence'", 5), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'a'}", "null"), CHUNK_CONTENT},
      {CH("{'content':'b'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(2, 5, 7, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     2, 5, 0, 1},
    {"no message_stop: no finish, no usage chunk, usage still counted",
     {START(8, 1, 0, 0), TEXT(0, "a"), MDELTA("'end_turn'", 4)},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'a'}", "null"), CHUNK_CONTENT}},
     8, 4, 0, 0},
    {"message_stop without message_delta: finish stop",
     {START(8, 1, 0, 0), TEXT(0, "a"), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {CH("{'content':'a'}", "null"), CHUNK_CONTENT},
      {FIN_CH("stop"), CHUNK_CONTENT},
      {USAGE_CH(8, 1, 9, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     8, 1, 0, 1},
    {"tool block past the 64-entry table",
     {START(1, 0, 0, 0), TOOL_START(70, "toolu_9", "f"), JSON_PIECE(70, "{}"), JSON_PIECE(71, "{}"),
      MDELTA("'tool_use'", 5), MSTOP},
     {{ROLE_CH, CHUNK_ROLE_ONLY},
      {TOOL_CH(0, "toolu_9", "f"), CHUNK_CONTENT},
      {ARGS_CH(0, "{}"), CHUNK_CONTENT},
      {FIN_CH("tool_calls"), CHUNK_CONTENT},
      {USAGE_CH(1, 5, 6, 0), CHUNK_USAGE_ONLY},
      {"[DONE]", CHUNK_DONE}},
     1, 5, 0, 1},
};

struct collected {
    char *data[MAX_EV * 2];
    size_t len[MAX_EV * 2];
    int n;
    int stop_after;             /* emit returns -1 at this payload (1-based), 0 = never */
};

static int collect(void *ctx, const char *data, size_t len)
{
    struct collected *c = ctx;
    CHECK(data && data[len] == '\0', "payload %d is not NUL-terminated", c->n);
    if (c->n < MAX_EV * 2) {
        c->data[c->n] = malloc(len + 1);
        memcpy(c->data[c->n], data, len);
        c->data[c->n][len] = '\0';
        c->len[c->n] = len;
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after ? -1 : 0;
}

static void collected_free(struct collected *c)
{
    for (int i = 0; i < c->n && i < MAX_EV * 2; i++)
        free(c->data[i]);
}

static void test_streams(void)
{
    for (size_t i = 0; i < sizeof stream_cases / sizeof stream_cases[0]; i++) {
        const struct stream_case *sc = &stream_cases[i];
        struct anthropic_stream s;
        anthropic_stream_init(&s, "gpt-claude", 1700000000);
        struct usage u = {0};
        struct collected got = {.n = 0};
        for (int e = 0; e < MAX_EV && sc->ev[e].event; e++) {
            char *data = q(sc->ev[e].data);
            int rc = anthropic_stream_event(&s, sc->ev[e].event, strlen(sc->ev[e].event), data, strlen(data), &u,
                                            collect, &got);
            CHECK(rc == 0, "%s: event %d returned %d", sc->name, e, rc);
            free(data);
        }
        int want_n = 0;
        while (want_n < MAX_EV && sc->out[want_n].json)
            want_n++;
        CHECK(got.n == want_n, "%s: %d payloads, want %d", sc->name, got.n, want_n);
        for (int k = 0; k < got.n && k < want_n; k++) {
            char what[160];
            snprintf(what, sizeof what, "%s: payload %d", sc->name, k);
            if (strcmp(sc->out[k].json, "[DONE]") == 0)
                CHECK_STR(got.data[k], "[DONE]", what);
            else
                check_json(what, got.data[k], got.len[k], sc->out[k].json);
            /* fcgi/usage.c must read each payload as the relay expects (R-USE-2) */
            struct usage cu = {0};
            enum chunk_kind kind = usage_classify_chunk(got.data[k], got.len[k], &cu);
            CHECK(kind == sc->out[k].kind, "%s: kind %d, want %d", what, (int)kind, (int)sc->out[k].kind);
            if (kind == CHUNK_USAGE_ONLY)
                CHECK(cu.found && cu.prompt_tokens == sc->prompt && cu.completion_tokens == sc->completion,
                      "%s: usage chunk reads %lld/%lld", what, (long long)cu.prompt_tokens,
                      (long long)cu.completion_tokens);
        }
        CHECK_INT(u.prompt_tokens, sc->prompt, sc->name);
        CHECK_INT(u.completion_tokens, sc->completion, sc->name);
        CHECK_INT(s.failed, sc->failed, sc->name);
        CHECK_INT(s.done, sc->done, sc->name);
        collected_free(&got);
    }
}

/* emit asking to stop (client gone) ends the translation with -1 */
static void test_stream_stop(void)
{
    struct anthropic_stream s;
    anthropic_stream_init(&s, "m", 1);
    struct collected got = {.n = 0, .stop_after = 1};
    const char *start = "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"usage\":{\"input_tokens\":1}}}";
    CHECK_INT(anthropic_stream_event(&s, "message_start", 13, start, strlen(start), NULL, collect, &got), -1,
              "emit stop");
    collected_free(&got);
    /* message_delta emits nothing; message_stop stopped at the finish chunk sends no usage
     * chunk and no [DONE], and a second message_stop sends nothing */
    struct collected got2 = {.n = 0, .stop_after = 1};
    const char *md = "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}";
    const char *ms = "{\"type\":\"message_stop\"}";
    CHECK_INT(anthropic_stream_event(&s, "message_delta", 13, md, strlen(md), NULL, collect, &got2), 0,
              "message_delta");
    CHECK_INT(got2.n, 0, "message_delta emits nothing");
    CHECK_INT(anthropic_stream_event(&s, "message_stop", 12, ms, strlen(ms), NULL, collect, &got2), -1,
              "emit stop at finish");
    CHECK_INT(got2.n, 1, "nothing after a stop");
    CHECK_INT(anthropic_stream_event(&s, "message_stop", 12, ms, strlen(ms), NULL, collect, &got2), 0,
              "message_stop again");
    CHECK_INT(got2.n, 1, "one finish chunk only");
    collected_free(&got2);
    /* stopped at the usage chunk: no [DONE] */
    anthropic_stream_init(&s, "m", 1);
    struct collected got4 = {.n = 0, .stop_after = 2};
    CHECK_INT(anthropic_stream_event(&s, "message_stop", 12, ms, strlen(ms), NULL, collect, &got4), -1,
              "emit stop at usage");
    CHECK_INT(got4.n, 2, "finish and usage, no [DONE]");
    collected_free(&got4);
    /* the model from message_start when init had none; event name by length */
    anthropic_stream_init(&s, NULL, 5);
    struct collected got3 = {.n = 0};
    const char *st = "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_y\",\"model\":\"claude-z\"}}";
    CHECK_INT(anthropic_stream_event(&s, "message_startXX", 13, st, strlen(st), NULL, collect, &got3), 0,
              "event_len honoured");
    CHECK_INT(got3.n, 1, "role chunk");
    if (got3.n == 1)
        check_json("model from message_start", got3.data[0], got3.len[0],
                   "{'id':'msg_y','object':'chat.completion.chunk','created':5,'model':'claude-z','choices':"
                   "[{'index':0,'delta':{'role':'assistant','content':''},'finish_reason':null}]}");
    collected_free(&got3);
}

/* Counts near INT64_MAX from an upstream are clamped, never summed into an overflow. */
static void test_huge_counts(void)
{
    static const char body[] = "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],"
                               "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":9223372036854775807,"
                               "\"output_tokens\":9223372036854775807,\"cache_read_input_tokens\":9223372036854775807,"
                               "\"cache_creation_input_tokens\":5}}";
    struct buf out;
    struct usage u = {0};
    char finish[32];
    buf_init(&out, 0);
    CHECK(anthropic_response(body, sizeof body - 1, "m", 1, &out, &u, finish, sizeof finish) == 0, "huge counts");
    CHECK(u.prompt_tokens > 0 && u.prompt_tokens <= 3000000000000LL && u.completion_tokens > 0, "clamped %lld/%lld",
          (long long)u.prompt_tokens, (long long)u.completion_tokens);
    CHECK(out.data && !strstr(out.data, "-"), "no negative count: %s", out.data ? out.data : "");
    buf_free(&out);
    struct anthropic_stream s;
    anthropic_stream_init(&s, "m", 1);
    static const char start[] = "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":"
                                "{\"input_tokens\":9223372036854775807,\"cache_read_input_tokens\":1}}}";
    struct usage su = {0};
    struct collected got = {0};
    anthropic_stream_event(&s, "message_start", 13, start, sizeof start - 1, &su, collect, &got);
    CHECK(su.prompt_tokens > 0, "stream prompt clamped: %lld", (long long)su.prompt_tokens);
    collected_free(&got);
}

int main(void)
{
    test_huge_counts();
    test_requests();
    test_request_arguments();
    test_request_capped();
    test_finish_reasons();
    test_responses();
    test_response_capped();
    test_errors();
    test_streams();
    test_stream_stop();
    printf("%zu request, %zu finish, %zu response, %zu error, %zu stream cases\n",
           sizeof req_cases / sizeof req_cases[0], sizeof finish_cases / sizeof finish_cases[0],
           sizeof resp_cases / sizeof resp_cases[0], sizeof error_cases / sizeof error_cases[0],
           sizeof stream_cases / sizeof stream_cases[0]);
    return check_done();
}
